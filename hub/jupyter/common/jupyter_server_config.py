"""Jupyter server settings for every server on the class hub."""

import os

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

# Terminals run bash as the server does, not as a login shell: a login shell's /etc/profile
# would take the course's Python off PATH.
c.ServerApp.terminado_settings = {"shell_command": ["/bin/bash"]}
# No news or update checks.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# JupyterLab's defaults for the class (lab-settings/overrides.json): no question about news.
HUB_JUPYTER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
c.LabApp.app_settings_dir = os.path.join(HUB_JUPYTER, "lab-settings")
