"""`make hub` / `make hub-stop`: start or stop the class's JupyterHub (see docs/HUB.md)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

from coursehub.ctl import main

if __name__ == "__main__":
    sys.exit(main())
