"""JupyterHub on one DGX without Kubernetes: DockerSpawner, one MIG slice per learner, whole GPUs for instructors,
and the labkit-progress service (course/classroom.md walks through a session).

Run the hub on the DGX host, in the course's virtual environment with its hub extra (jupyterhub, dockerspawner,
NativeAuthenticator, the idle culler, labkit):

    LABKIT_ADMIN_PASSWORD_FILE=/etc/labkit-hub/admin-password LABKIT_INSTRUCTORS=ingrid,ivan LABKIT_INSTRUCTOR_GPUS=7 \\
        jupyterhub -f deploy/jupyterhub/jupyterhub_config.py

Settings (environment):
    LABKIT_IMAGE             the course image (deploy/Containerfile), default labkit-course:cuda12
    LABKIT_LOGIN             who logs in (labkit.hub_setup): native (default: learners sign up, an instructor approves
                             each at /hub/authorize), github, google, oidc or lti13 (each with its own LABKIT_* settings)
    LABKIT_ADMIN_PASSWORD_FILE  native login: a file (0600) holding the instructors' first password (10+ characters);
                             LABKIT_ADMIN_PASSWORD instead leaves it in the hub's exec-time environment
    LABKIT_SIGNUP_CODE       the class's sign-up code (default: one made once, kept in LABKIT_STATE_DIR/signup-code and
                             printed in the hub's log): a sign-up without it is refused
    LABKIT_SESSION_HOURS     how long a login and an API token last (default 12)
    LABKIT_INSTRUCTORS       comma-separated instructor user names: the `teaching` role (approvals, start/stop servers,
                             the admin page; never opening a learner's server) and the `instructor` role (the progress
                             page). Nobody is a hub admin.
    LABKIT_INSTRUCTOR_GPUS   GPU indices (or GPU UUIDs) with MIG disabled, for instructors' servers
    LABKIT_MIG_SLICES        MIG UUIDs to hand out, instead of asking NVML / nvidia-smi -L
    LABKIT_STATE_DIR         where the hub keeps its files (default /srv/labkit-hub)
    LABKIT_HUB_CONNECT_IP    the host's address on the Docker network (its gateway), where containers reach the hub
    LABKIT_TLS_CERT, LABKIT_TLS_KEY   the hub's certificate and key (PEM); without them a self-signed pair is made in
                             LABKIT_STATE_DIR/tls for LABKIT_HUB_HOSTNAME (default: this host's name)
    LABKIT_TLS               off: plain HTTP, only behind a proxy of your own that serves HTTPS (default on)
    LABKIT_BIND_URL          where the public side listens (default https://0.0.0.0:443, http://0.0.0.0:8000 with TLS off)
    LABKIT_IDLE_MINUTES      stop servers idle this long, freeing their slices (default 60; 0: never)
    LABKIT_MAX_AGE_HOURS     stop any server running this long, however active it says it is (default 10; 0: never)
    LABKIT_SUBDOMAIN_HOST    e.g. https://hub.school.edu: each learner's server on its own origin,
                             https://<name>.hub.school.edu (needs wildcard DNS and a certificate for *.hub.school.edu;
                             the self-signed one covers it). Without it every server shares the hub's origin: see
                             course/classroom.md, "Threat model", for what that leaves open
    LABKIT_PIDS_LIMIT        processes per learner container (default 2048); LABKIT_DISK_LIMIT e.g. 20G (overlay2 on
                             xfs with project quotas) limits its writable layer
    LABKIT_HOME_SIZE         size of each learner's home volume (default 10G: Docker's local volume driver with xfs
                             project quotas under /var/lib/docker; the hub checks at start that a limited volume can be
                             made); off: no limit (the hub warns)
    LABKIT_ALLOW_ICC         1: accept a learners' network on which containers reach each other (default: refused)
    LABKIT_SLICE_WAIT_S      how long a start waits in line for a slice when all are taken (default 120)
    LABKIT_STUCK_MINUTES     the progress page marks a learner stuck after this long (default 10)

The learners' containers run on a Docker network, `labkit`, on which they cannot reach each other
(`docker network create -o com.docker.network.bridge.enable_icc=false labkit`; the hub refuses any other); the hub, the proxy and
the progress service run on the host. Kernels post results straight to the progress service on the Docker network
(LABKIT_HUB_CONNECT_IP:10101), like the hub's own API; browsers reach everything through the HTTPS proxy.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mig_allocator import SliceAllocator, discover, held_by_containers  # noqa: E402

from labkit.hub_setup import (  # noqa: E402
    check_docker_network,
    check_home_quota,
    home_mounts,
    configure_culler,
    configure_login,
    configure_origins,
    configure_tls,
    container_hardening,
    instructors_from,
    secure_state,
    signup_code,
)
from labkit.progress_service import SERVICE_NAME, configure_hub  # noqa: E402

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

env = os.environ
# the state folder 0700 and its databases 0600 (every password hash is in jupyterhub.sqlite); umask 0077 from here on
state = secure_state(env.get("LABKIT_STATE_DIR", "/srv/labkit-hub"))
instructors = instructors_from(env)
instructor_gpus = [g.strip() for g in env.get("LABKIT_INSTRUCTOR_GPUS", "").split(",") if g.strip()]
network = env.get("LABKIT_DOCKER_NETWORK", "labkit")
# the host as the learners' containers see it: the gateway of the Docker network
# (docker network inspect labkit -f '{{(index .IPAM.Config 0).Gateway}}')
connect_ip = env.get("LABKIT_HUB_CONNECT_IP", "172.17.0.1")

# ---------------------------------------------------------------------------------------------- the hub itself, over HTTPS
tls = env.get("LABKIT_TLS", "on").strip().lower() not in ("off", "0", "false", "no")
subdomain_host = env.get("LABKIT_SUBDOMAIN_HOST", "").strip()
_subdomain_name = subdomain_host.split("://", 1)[-1].split("/")[0].split(":")[0]
subdomain_names = [_subdomain_name, f"*.{_subdomain_name}"] if subdomain_host else []  # the hub and every learner
if tls:
    hostname = env.get("LABKIT_HUB_HOSTNAME", "") or socket.getfqdn()
    configure_tls(c, cert=env.get("LABKIT_TLS_CERT") or None, key=env.get("LABKIT_TLS_KEY") or None,
                  self_signed_dir=state / "tls", hosts=[hostname, "localhost", "127.0.0.1", *subdomain_names])
c.JupyterHub.bind_url = env.get("LABKIT_BIND_URL", "https://0.0.0.0:443" if tls else "http://0.0.0.0:8000")
c.JupyterHub.hub_ip = connect_ip  # the hub's API, for the containers only
c.JupyterHub.hub_connect_ip = connect_ip
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = False  # a hub restart leaves learners' containers (and their slices) running

# ---------------------------------------------------------------------------------------------- who logs in: each their own
configure_login(c, login=env.get("LABKIT_LOGIN", "native"), instructors=instructors, env=env)
if c.NativeAuthenticator.enable_signup is True and env.get("LABKIT_LOGIN", "native") == "native":
    c.CourseNativeAuthenticator.signup_code = signup_code(state, env)
    print(f"labkit hub: the class's sign-up code is {c.CourseNativeAuthenticator.signup_code} (also in "
          f"{state / 'signup-code'}); learners sign up at /hub/signup?code={c.CourseNativeAuthenticator.signup_code}",
          file=sys.stderr, flush=True)
# the proxy runs on this host and reaches the hub at connect_ip: its X-Forwarded-For names each browser's address
# (learners' containers reach the hub from their own addresses, which are not believed)
c.CourseNativeAuthenticator.trusted_proxies = [connect_ip]
# learners' pages away from the hub's origin and cookies (per-user subdomains with LABKIT_SUBDOMAIN_HOST; always:
# no user config in learners' servers, SameSite cookies, HSTS)
configure_origins(c, subdomain_host=subdomain_host or None, tls=tls)

# ---------------------------------------------------------------------------------------------- one container per learner
c.JupyterHub.spawner_class = "docker"
c.DockerSpawner.image = env.get("LABKIT_IMAGE", "labkit-course:cuda12")
c.DockerSpawner.network_name = network
c.DockerSpawner.use_internal_ip = True
c.DockerSpawner.remove = True
c.DockerSpawner.cmd = ["/opt/course/deploy/singleuser.sh"]
# per-user storage (work copies, progress file): a named volume, limited to LABKIT_HOME_SIZE (xfs project quotas)
home_size = env.get("LABKIT_HOME_SIZE", "10G").strip()
c.DockerSpawner.mounts = home_mounts(home_size)
c.DockerSpawner.mem_limit = env.get("LABKIT_MEM_LIMIT", "16G")
c.DockerSpawner.cpu_limit = float(env.get("LABKIT_CPU_LIMIT", "4"))
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90

slices = discover()


def _slices_in_use():  # asked only when the state file is damaged: the running containers' --gpus devices
    import docker

    return held_by_containers(docker.from_env(), slices)


if env.get("LABKIT_ALLOW_ICC", "") != "1":  # learners' containers must not reach each other
    import docker

    check_docker_network(docker.from_env(), network)
if home_size.lower() not in ("off", "0", ""):  # a home volume with a size limit can be made on this host
    import docker

    check_home_quota(docker.from_env(), home_size)
else:
    print("labkit hub: WARNING: LABKIT_HOME_SIZE=off: learners' home volumes have no size limit; one learner can "
          "fill /var/lib/docker for everyone", file=sys.stderr, flush=True)


allocator = SliceAllocator(slices, state_file=state / "mig-slices.json", rebuild=_slices_in_use)
slice_wait_s = float(env.get("LABKIT_SLICE_WAIT_S", "120"))


# plain functions, not bound methods: traitlets deep-copies config values into each spawner, and a copied
# allocator would no longer be the one that knows which slices are taken
async def _take_slice(spawner):
    await allocator.pre_spawn_hook(spawner, instructors=instructors, wait_s=slice_wait_s)


hardening = container_hardening(env)  # PID limit, no capabilities, no new privileges (seccomp stays Docker's default)


def _device_request(spawner):
    return {**hardening, **allocator.host_config(spawner, instructors=instructors, instructor_gpus=instructor_gpus)}


async def _free_slice(spawner):
    await allocator.post_stop_hook_checked(spawner)  # only once the container is gone


c.Spawner.pre_spawn_hook = _take_slice
c.DockerSpawner.extra_host_config = _device_request
c.Spawner.post_stop_hook = _free_slice

# ---------------------------------------------------------------------------------------------- progress and culling
# the service listens on the Docker network's gateway: the proxy (for browsers) and the kernels reach it there
progress_service_url = f"http://{connect_ip}:10101"
configure_hub(
    c,
    public_url=c.JupyterHub.bind_url,
    service_url=progress_service_url,
    progress_url=f"{progress_service_url}/services/{SERVICE_NAME}/",
    db=str(state / "labkit-progress.sqlite"),
    instructors=instructors,
    stuck_minutes=float(env.get("LABKIT_STUCK_MINUTES", "10")),
)
# idle servers are stopped (their slices freed); without jupyterhub-idle-culler installed the hub does not start
configure_culler(c, idle_minutes=float(env.get("LABKIT_IDLE_MINUTES", "60")),
                 max_age_hours=float(env.get("LABKIT_MAX_AGE_HOURS", "10")))
