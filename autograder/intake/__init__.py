"""Files in, identified submissions out: folders, archives, LMS exports, nbgrader's exchange.

Nothing here runs student code; it copies only regular files it bounded and never follows a link.
"""
