"""JupyterHub on one DGX without Kubernetes: DockerSpawner, one MIG slice per learner, whole GPUs for instructors,
and the labkit-progress service (course/classroom.md walks through a session).

Run the hub on the DGX host, in the course's virtual environment (it has jupyterhub, dockerspawner and labkit):

    LABKIT_CLASS_PASSWORD=... LABKIT_INSTRUCTORS=ingrid,ivan LABKIT_INSTRUCTOR_GPUS=7 \\
        jupyterhub -f deploy/jupyterhub/jupyterhub_config.py

Settings (environment):
    LABKIT_IMAGE             the course image (deploy/Containerfile), default labkit-course:cuda12
    LABKIT_CLASS_PASSWORD    the shared password learners log in with (SharedPasswordAuthenticator)
    LABKIT_ADMIN_PASSWORD    the instructors' password (at least 32 characters; instructors are hub admins)
    LABKIT_INSTRUCTORS       comma-separated instructor user names (the `instructor` role: the progress page)
    LABKIT_INSTRUCTOR_GPUS   GPU indices (or GPU UUIDs) with MIG disabled, for instructors' servers
    LABKIT_MIG_SLICES        MIG UUIDs to hand out, instead of asking NVML / nvidia-smi -L
    LABKIT_STATE_DIR         where the hub keeps its files (default /srv/labkit-hub)
    LABKIT_HUB_CONNECT_IP    the host's address on the Docker network (its gateway), where containers reach the hub
    LABKIT_IDLE_MINUTES      stop servers idle this long (default 60; needs jupyterhub-idle-culler)
    LABKIT_STUCK_MINUTES     the progress page marks a learner stuck after this long (default 10)

The learners' containers run on a Docker network, `labkit` (`docker network create labkit`); the hub, the proxy and
the progress service run on the host. Kernels post results through the proxy at LABKIT_HUB_CONNECT_IP:8000.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mig_allocator import SliceAllocator, discover  # noqa: E402

from labkit.progress_service import configure_hub  # noqa: E402

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

env = os.environ
state = Path(env.get("LABKIT_STATE_DIR", "/srv/labkit-hub"))
state.mkdir(parents=True, exist_ok=True)
instructors = sorted({u.strip() for u in env.get("LABKIT_INSTRUCTORS", "").split(",") if u.strip()})
instructor_gpus = [g.strip() for g in env.get("LABKIT_INSTRUCTOR_GPUS", "").split(",") if g.strip()]
network = env.get("LABKIT_DOCKER_NETWORK", "labkit")
# the host as the learners' containers see it: the gateway of the Docker network
# (docker network inspect labkit -f '{{(index .IPAM.Config 0).Gateway}}')
connect_ip = env.get("LABKIT_HUB_CONNECT_IP", "172.17.0.1")

# ---------------------------------------------------------------------------------------------- the hub itself
c.JupyterHub.bind_url = env.get("LABKIT_BIND_URL", "http://0.0.0.0:8000")
c.JupyterHub.hub_ip = connect_ip  # the hub's API, for the containers only
c.JupyterHub.hub_connect_ip = connect_ip
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = False  # a hub restart leaves learners' containers (and their slices) running

# ---------------------------------------------------------------------------------------------- who logs in
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = env.get("LABKIT_CLASS_PASSWORD", "")
if env.get("LABKIT_ADMIN_PASSWORD"):
    c.SharedPasswordAuthenticator.admin_password = env["LABKIT_ADMIN_PASSWORD"]
c.Authenticator.admin_users = set(instructors)
c.Authenticator.allow_all = True

# ---------------------------------------------------------------------------------------------- one container per learner
c.JupyterHub.spawner_class = "docker"
c.DockerSpawner.image = env.get("LABKIT_IMAGE", "labkit-course:cuda12")
c.DockerSpawner.network_name = network
c.DockerSpawner.use_internal_ip = True
c.DockerSpawner.remove = True
c.DockerSpawner.cmd = ["/opt/course/deploy/singleuser.sh"]
c.DockerSpawner.volumes = {"labkit-home-{username}": "/home/learner"}  # per-user storage: work copies, progress file
c.DockerSpawner.mem_limit = env.get("LABKIT_MEM_LIMIT", "16G")
c.DockerSpawner.cpu_limit = float(env.get("LABKIT_CPU_LIMIT", "4"))
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90

allocator = SliceAllocator(discover(), state_file=state / "mig-slices.json")


# plain functions, not bound methods: traitlets deep-copies config values into each spawner, and a copied
# allocator would no longer be the one that knows which slices are taken
def _device_request(spawner):
    return allocator.host_config(spawner, instructors=instructors, instructor_gpus=instructor_gpus)


def _free_slice(spawner):
    allocator.post_stop_hook(spawner)


c.DockerSpawner.extra_host_config = _device_request
c.Spawner.post_stop_hook = _free_slice

# ---------------------------------------------------------------------------------------------- progress and culling
configure_hub(
    c,
    public_url=f"http://{connect_ip}:8000",  # the proxy, as the kernels reach it to post results
    service_url="http://127.0.0.1:10101",
    db=str(state / "labkit-progress.sqlite"),
    instructors=instructors,
    stuck_minutes=float(env.get("LABKIT_STUCK_MINUTES", "10")),
)

idle = int(env.get("LABKIT_IDLE_MINUTES", "60"))
if idle > 0 and importlib.util.find_spec("jupyterhub_idle_culler") is not None:
    c.JupyterHub.services.append({
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={idle * 60}"],
    })
    c.JupyterHub.load_roles.append({
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    })
