"""Accounts for a small class: NativeAuthenticator (sign-up, approval by an administrator),
with its login page made to work on JupyterHub 6.

NativeAuthenticator 1.3.0, the latest release, times each login with `self.statsd`, which
JupyterHub 6 removed (jupyterhub#5407), so every login fails with an AttributeError; and its
login page cannot render JupyterHub 6's in-page error messages (`sync=True`). The login
handler here is NativeAuthenticator's, with those two points fixed; nothing else changes.
"""

from __future__ import annotations

from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
from tornado.escape import url_escape
from tornado.httputil import url_concat


class _NoTimer:
    def start(self):
        return self

    def stop(self, send=True):
        return None


class _NoStatsd:
    def timer(self, name):
        return _NoTimer()


class LoginHandler(NativeLoginHandler):
    statsd = _NoStatsd()

    def _render(self, login_error=None, username=None, sync=False, **kwargs):
        return self.render_template(
            "native-login.html",
            sync=sync,
            next=url_escape(self.get_argument("next", default="")),
            username=username,
            login_error=login_error,
            custom_html=self.authenticator.custom_html,
            login_url=self.settings["login_url"],
            enable_signup=self.authenticator.enable_signup,
            two_factor_auth=self.authenticator.allow_2fa,
            authenticator_login_url=url_concat(
                self.authenticator.login_url(self.hub.base_url),
                {"next": self.get_argument("next", "")},
            ),
        )


class ClassAuthenticator(NativeAuthenticator):
    """NativeAuthenticator with the login handler above."""

    def get_handlers(self, app):
        return [(path, LoginHandler if handler is NativeLoginHandler else handler)
                for path, handler in super().get_handlers(app)]
