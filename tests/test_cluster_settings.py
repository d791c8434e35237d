"""The class hub's `[feedback] cluster` (hub/lib/coursehub/settings.py): only a TLS
scheduler on another machine. A scheduler students' servers can reach (on the one-machine hub,
any address of the hub's own machine) hands them its workers, with the course secret and the
solutions they hold."""

from __future__ import annotations

import socket
import sys

import pytest

from conftest import COURSE_ROOT

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub import settings as class_settings
from coursehub.settings import ConfigError

pytestmark = pytest.mark.fast


def _load(tmp_path, feedback: str):
    path = tmp_path / "class.toml"
    path.write_text('[accounts]\nadmins = ["a"]\n[feedback]\n' + feedback)
    return class_settings.load(path).on_submit


@pytest.mark.parametrize("address, complaint", [
    ("tcp://10.9.8.7:8786", "must be tls://HOST:PORT: anyone who reaches a tcp:// scheduler"),
    ("10.9.8.7:8786", "must be tls://HOST:PORT"),
    ("tls://127.0.0.1:8786", "is on this machine (127.0.0.1 is a loopback address)"),
    ("tls://localhost:8786", "is a loopback address"),
    ("tls://[::1]:8786", "is on this machine (::1 is a loopback address)"),
    ("tls://0.0.0.0:8786", "is on this machine (0.0.0.0 is every address of this machine)"),
    (f"tls://{socket.gethostname()}:8786", "is on this machine"),
])
def test_a_scheduler_students_can_reach_is_refused(tmp_path, address, complaint):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, f'cluster = "{address}"\n')
    assert complaint in str(caught.value)
    assert "docs/" in str(caught.value)


def test_every_address_of_this_machine_is_refused(tmp_path):
    import psutil

    mine = sorted({a.address for nic in psutil.net_if_addrs().values() for a in nic
                   if a.family == socket.AF_INET})
    assert mine
    for address in mine:
        with pytest.raises(ConfigError, match="is on this machine"):
            _load(tmp_path, f'cluster = "tls://{address}:8786"\n')


def test_a_tls_scheduler_elsewhere_is_taken_with_its_certificates(tmp_path):
    on_submit = _load(tmp_path, 'cluster = "tls://10.9.8.7:8786"\n'
                                'cluster_tls = ["ca.pem", "hub.pem", "hub.key"]\n')
    assert on_submit.cluster == "tls://10.9.8.7:8786"
    assert on_submit.cluster_tls == ("ca.pem", "hub.pem", "hub.key")
    with pytest.raises(ConfigError, match="cluster_tls must be the paths of the cluster's CA"):
        _load(tmp_path, 'cluster = "tls://10.9.8.7:8786"\ncluster_tls = ["ca.pem"]\n')
