"""The server side of a course: JupyterHub setup and logins, progress and the gradebook, MIG, export, work copies.

Nothing here is imported by the labs; the ``labkit`` command (:mod:`labkit.cli`) and JupyterHub's config use it.
"""
