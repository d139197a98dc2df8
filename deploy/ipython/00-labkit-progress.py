# IPython startup file of the course image (deploy/install.sh puts it in <venv>/etc/ipython/startup/, which every
# kernel of that environment runs): a kernel starting in a JupyterHub server sends the check results that an earlier
# kernel could not send (labkit.progress.kernel_start), in a background thread. Outside a hub it does nothing.
try:
    from labkit import progress as _labkit_progress

    _labkit_progress.kernel_start()
    del _labkit_progress
except Exception:  # noqa: BLE001 - a kernel always starts
    pass
