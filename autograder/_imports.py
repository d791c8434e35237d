"""Import jsonschema without its slowest optional part (imported first by the grading modules).

jsonschema imports `rfc3987_syntax`, when installed, to check the "iri" string format; that
module compiles an Earley grammar on import, about 2 s, in every grading process. Neither
nbformat nor nbgrader checks formats, so jsonschema is imported here with that module hidden
(it then leaves the "iri" check out); the module itself stays importable afterwards.
"""

from __future__ import annotations

import sys


def _import_jsonschema_quickly() -> None:
    if "jsonschema" in sys.modules:
        return
    hidden = "rfc3987_syntax" not in sys.modules
    if hidden:
        sys.modules["rfc3987_syntax"] = None  # makes `import rfc3987_syntax` raise ImportError
    try:
        import jsonschema  # noqa: F401
    except ImportError:  # pragma: no cover (jsonschema comes with nbformat)
        pass
    finally:
        if hidden and sys.modules.get("rfc3987_syntax", 0) is None:
            del sys.modules["rfc3987_syntax"]


_import_jsonschema_quickly()
