"""The course on JupyterHub: the class configuration, its state folder, accounts and servers.

`make hub` runs `python hub/hubctl.py start`; JupyterHub loads hub/jupyterhub_config.py, which
configures itself from hub/class.toml through this package. Each user's server starts through
`python -m coursehub.singleuser`, which picks the student's or the instructor's Jupyter
configuration (hub/jupyter/).
"""
