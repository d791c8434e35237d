#!/bin/sh
# Builds the single-user image's contents (hub/Dockerfile runs it as root in the image).
#
#   COURSE_SRC        the files the Dockerfile copies in (requirements.lock, coursekit, ...)
#   COURSE_PREFIX     where the course goes: venv/, hub/, nbgrader_config.py (/opt/course)
#   COURSE_EXCHANGE   nbgrader's exchange, mounted there by the hub (/srv/exchange)
#   TORCH_INDEX_URL   where torch's CPU-only wheel comes from; empty: pip's configured index
#   NB_USER, NB_UID, NB_GID   the account servers run as; NB_USER empty: create none
#   PIP_INSTALL_FLAGS extra pip flags for the lock's install (tests: --dry-run --report FILE)
set -eu

: "${COURSE_SRC:?}" "${COURSE_PREFIX:?}" "${COURSE_EXCHANGE:?}"
TORCH_INDEX_URL=${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
NB_USER=${NB_USER-jovyan}
NB_UID=${NB_UID:-1000}
NB_GID=${NB_GID:-100}
PIP_INSTALL_FLAGS=${PIP_INSTALL_FLAGS:-}
PYTHON=${PYTHON:-python3}
VENV="$COURSE_PREFIX/venv"
LOCK="$COURSE_SRC/requirements.lock"

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || { echo "install.sh: the course needs Python 3.11" >&2; exit 1; }

# 1. The course's environment: exactly requirements.lock. torch comes from the CPU-only index
#    first, so that the lock's `torch==2.13.0` is already satisfied and pip never picks the
#    CUDA build (several GB of nvidia-* packages).
mkdir -p "$COURSE_PREFIX"
"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check --no-input"
TORCH=$(grep -E '^torch==' "$LOCK")
if [ -n "$TORCH_INDEX_URL" ]; then
    # shellcheck disable=SC2086
    $PIP install --no-cache-dir $PIP_INSTALL_FLAGS --index-url "$TORCH_INDEX_URL" "$TORCH"
fi
# shellcheck disable=SC2086
$PIP install --no-cache-dir $PIP_INSTALL_FLAGS -r "$LOCK"

# 2. The course's own packages (coursekit, autograder), not editable, without dependencies:
#    the lock has them all.
$PIP install --no-cache-dir --no-deps "$COURSE_SRC"

# 3. The course's nbgrader settings and students' Jupyter configuration (students' Validate
#    loads them), its README (the start page's lessons) and the hub's Jupyter configuration
#    for each role (hub/lib/coursehub/singleuser.py picks one).
cp "$COURSE_SRC/nbgrader_config.py" "$COURSE_SRC/README.md" "$COURSE_PREFIX/"
mkdir -p "$COURSE_PREFIX/hub" "$COURSE_PREFIX/jupyter"
cp -R "$COURSE_SRC/hub/lib" "$COURSE_SRC/hub/jupyter" "$COURSE_PREFIX/hub/"
cp -R "$COURSE_SRC/jupyter/student" "$COURSE_PREFIX/jupyter/"
find "$COURSE_PREFIX/hub" -name __pycache__ -prune -exec rm -rf {} +

# 4. The exchange's mount point: nbgrader checks that its root is writable.
mkdir -p "$COURSE_EXCHANGE"
chmod 1777 "$COURSE_EXCHANGE"

# 5. The account servers run as.
if [ -n "$NB_USER" ]; then
    useradd --create-home --uid "$NB_UID" --gid "$NB_GID" --shell /bin/bash "$NB_USER"
fi

# 6. Checks: the image holds no solutions or grading scenarios; the environment is the lock (a dry run installs
#    nothing, so only the course's packages can be imported then).
if find "$COURSE_PREFIX" -path "$VENV" -prune -o \( -name solutions -o -name scenarios -o -name '*.ipynb' \) -print \
        | grep -q .; then
    echo "install.sh: notebooks, solutions or scenarios ended up in $COURSE_PREFIX" >&2
    exit 1
fi
case " $PIP_INSTALL_FLAGS " in
    *" --dry-run "*)
        "$VENV/bin/python" -I -c 'import coursekit, autograder' ;;
    *)
        $PIP check
        "$VENV/bin/python" -I -c '
import torch, nbgrader, jupyterhub, coursekit, autograder
assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
assert torch.version.cuda is None, "a CUDA build of torch"
' ;;
esac
echo "install.sh: the course is installed in $COURSE_PREFIX"
