"""The class hub's idle culler: jupyterhub-idle-culler, as hub/class.toml
configures it, stops a server left idle and keeps the user's files.

A file of its own, apart from tests/test_hub.py's end-to-end class, so that the two hubs can
run side by side under pytest-xdist. Needs what tests/test_hub.py needs (root, npm, Chromium).
"""

from __future__ import annotations

import pytest

import browser_support as lab_page
from test_hub import (ClassHub, browser, log_in, open_lab_after_login, sign_up,  # noqa: F401
                      user_processes, wait_until)

pytestmark = [pytest.mark.browser, pytest.mark.hub]


def test_an_idle_server_is_stopped_and_its_home_stays(browser):
    """jupyterhub-idle-culler, as the class file configures it: a server left without activity
    longer than idle_timeout is stopped; the user's files stay."""
    hub = ClassHub(idle_timeout=10, cull_every=3)
    try:
        hub.start()
        assert "signup was successful" in sign_up(browser, hub, hub.admin)
        context = browser.new_context(viewport=lab_page.VIEWPORT)
        context.set_default_timeout(60_000)
        try:
            # An administrator lands on the sign-ups; /hub/spawn starts their server.
            open_lab_after_login(log_in(context, hub, hub.admin, next_url="/hub/spawn"),
                                 hub.admin)
        finally:
            context.close()  # nobody uses the server any more
        # The server started (the hub's log says so). Its processes are not looked for here:
        # on a busy machine the culler, 10 s idle, may have stopped it already.
        log = (hub.settings.hub_dir / "jupyterhub.log").read_text()
        assert f"User {hub.admin} took" in log, log[-3000:]
        kept = hub.settings.home(hub.admin) / "notes.txt"
        kept.write_text("still here")
        wait_until(lambda: not user_processes(hub.admin), "stop of the idle server",
                   timeout=180)
        log = (hub.settings.hub_dir / "jupyterhub.log").read_text()
        assert f"Culling server {hub.admin}" in log
        assert kept.read_text() == "still here"
    finally:
        hub.remove()
