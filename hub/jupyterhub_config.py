"""JupyterHub's configuration for the class; everything a class changes is in hub/class.toml.

Started by `make hub` (hub/hubctl.py); HUB_CONFIG names another class file.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

from coursehub import hubconfig, settings

c = get_config()  # noqa: F821 (provided by JupyterHub when it loads this file)
hubconfig.configure(c, settings.load())
