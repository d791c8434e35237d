"""Files in, identified submissions out: folders, archives, LMS exports, the copying
that nbgrader's exchange steps (nbgrader_glue/exchange.py) use.

Nothing here runs student code; it copies only regular files it bounded and never follows a link.
"""
