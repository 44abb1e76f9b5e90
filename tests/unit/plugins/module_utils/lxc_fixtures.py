"""Container configs in the shapes real Proxmox and LXC files take, before and after the edit.

Proxmox writes ``/etc/pve/lxc/<vmid>.conf`` as: the description as ``#`` lines (URL-encoded:
``%3A`` for ':'), sorted ``key: value`` lines, raw ``lxc.*`` lines last, then a blank line
and each snapshot section ``[name]`` (with ``snaptime``), then ``[pve:pending]``. Plain LXC
writes ``/var/lib/lxc/<name>/config`` as ``key = value`` with ``#`` comments. Each AFTER_*
constant is the whole file the module must leave, byte for byte.
"""

PVE_PLAIN = (
    b"#GPU serving container%3A vLLM on 2x H200\n"
    b"#Owner%3A ml-platform (https%3A//wiki.example.net/llm-serve)\n"
    b"arch: amd64\n"
    b"cores: 32\n"
    b"features: nesting=1\n"
    b"hostname: llm-serve-01\n"
    b"memory: 262144\n"
    b"mp0: /tank/models,mp=/models,ro=1\n"
    b"net0: name=eth0,bridge=vmbr0,firewall=1,gw=192.0.2.1,hwaddr=BC:24:11:5E:7A:01,ip=192.0.2.111/24,type=veth\n"
    b"onboot: 1\n"
    b"ostype: debian\n"
    b"rootfs: local-zfs:subvol-101-disk-0,size=64G\n"
    b"swap: 0\n"
    b"unprivileged: 1\n"
    b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
    b"lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
)

AFTER_PVE_PLAIN = PVE_PLAIN + b"lxc.prlimit.memlock: unlimited\n"

# Snapshot sections carry their own lxc.* lines (memlock included) and a pending section
# follows; only the part before the first '[' may change.
PVE_SNAPSHOTS = (
    b"#GPU serving container\n"
    b"arch: amd64\n"
    b"cores: 16\n"
    b"hostname: llm-serve-02\n"
    b"memory: 131072\n"
    b"net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:02,ip=dhcp,type=veth\n"
    b"ostype: ubuntu\n"
    b"parent: before-driver-580\n"
    b"rootfs: local-lvm:vm-102-disk-0,size=32G\n"
    b"swap: 512\n"
    b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
    b"\n"
    b"[before-driver-580]\n"
    b"#GPU serving container\n"
    b"arch: amd64\n"
    b"cores: 16\n"
    b"hostname: llm-serve-02\n"
    b"memory: 131072\n"
    b"ostype: ubuntu\n"
    b"rootfs: local-lvm:vm-102-disk-0,size=32G\n"
    b"snaptime: 1764400000\n"
    b"swap: 512\n"
    b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
    b"lxc.prlimit.memlock: 65536\n"
    b"\n"
    b"[pve:pending]\n"
    b"memory: 262144\n"
    b"lxc.prlimit.memlock: 1024\n"
)

AFTER_PVE_SNAPSHOTS = (
    b"#GPU serving container\n"
    b"arch: amd64\n"
    b"cores: 16\n"
    b"hostname: llm-serve-02\n"
    b"memory: 131072\n"
    b"net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:02,ip=dhcp,type=veth\n"
    b"ostype: ubuntu\n"
    b"parent: before-driver-580\n"
    b"rootfs: local-lvm:vm-102-disk-0,size=32G\n"
    b"swap: 512\n"
    b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
    b"lxc.prlimit.memlock: unlimited\n"
    b"\n"
    b"[before-driver-580]\n"
    b"#GPU serving container\n"
    b"arch: amd64\n"
    b"cores: 16\n"
    b"hostname: llm-serve-02\n"
    b"memory: 131072\n"
    b"ostype: ubuntu\n"
    b"rootfs: local-lvm:vm-102-disk-0,size=32G\n"
    b"snaptime: 1764400000\n"
    b"swap: 512\n"
    b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
    b"lxc.prlimit.memlock: 65536\n"
    b"\n"
    b"[pve:pending]\n"
    b"memory: 262144\n"
    b"lxc.prlimit.memlock: 1024\n"
)

# An existing value in Proxmox's colon form, and a duplicate in '=' form further down.
PVE_EXISTING_DUPLICATES = (
    b"arch: amd64\n"
    b"hostname: llm-serve-03\n"
    b"lxc.prlimit.memlock: 65536\n"
    b"memory: 65536\n"
    b"rootfs: local-lvm:vm-103-disk-0,size=16G\n"
    b"lxc.prlimit.memlock = 131072\n"
    b"lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
)

AFTER_PVE_EXISTING_DUPLICATES = (
    b"arch: amd64\n"
    b"hostname: llm-serve-03\n"
    b"lxc.prlimit.memlock: unlimited\n"
    b"memory: 65536\n"
    b"rootfs: local-lvm:vm-103-disk-0,size=16G\n"
    b"lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
)

# Plain LXC, as lxc-create writes it, with an operator's comments.
LXC_PLAIN = (
    b"# Template used to create this container: /usr/share/lxc/templates/lxc-download\n"
    b"# Parameters passed to the template: -d debian -r bookworm -a amd64\n"
    b"# For additional config options, please look at lxc.container.conf(5)\n"
    b"\n"
    b"# Distribution configuration\n"
    b"lxc.include = /usr/share/lxc/config/common.conf\n"
    b"lxc.arch = linux64\n"
    b"\n"
    b"# Container specific configuration\n"
    b"lxc.rootfs.path = dir:/var/lib/lxc/serving/rootfs\n"
    b"lxc.uts.name = serving\n"
    b"\n"
    b"# Network configuration\n"
    b"lxc.net.0.type = veth\n"
    b"lxc.net.0.link = lxcbr0\n"
    b"lxc.net.0.flags = up\n"
    b"lxc.net.0.hwaddr = 00:16:3e:12:34:56\n"
)

AFTER_LXC_PLAIN = LXC_PLAIN + b"lxc.prlimit.memlock = unlimited\n"

# An existing -1 (strtoull makes it RLIM_INFINITY: already unlimited) with odd spacing.
LXC_MINUS_ONE = (
    b"lxc.uts.name = serving\n"
    b"lxc.rootfs.path = dir:/var/lib/lxc/serving/rootfs\n"
    b"lxc.prlimit.memlock=-1\n"
    b"lxc.net.0.type = empty\n"
)

# No final newline, tight '=' style (the new line follows it), and a commented-out line with
# the key that must stay a comment.
LXC_NO_FINAL_NEWLINE = (
    b"lxc.uts.name=serving\n"
    b"#lxc.prlimit.memlock=unlimited   (disabled while testing)\n"
    b"lxc.rootfs.path=dir:/srv/lxc/serving/rootfs\n"
    b"lxc.net.0.type=empty"
)

AFTER_LXC_NO_FINAL_NEWLINE = (
    b"lxc.uts.name=serving\n"
    b"#lxc.prlimit.memlock=unlimited   (disabled while testing)\n"
    b"lxc.rootfs.path=dir:/srv/lxc/serving/rootfs\n"
    b"lxc.net.0.type=empty\n"
    b"lxc.prlimit.memlock=unlimited"
)

# CRLF (a config edited on a Windows share) with the key present, indented and spaced.
LXC_CRLF = (
    b"lxc.uts.name = serving\r\n"
    b"  lxc.prlimit.memlock   =   8388608  \r\n"
    b"lxc.rootfs.path = dir:/srv/lxc/serving/rootfs\r\n"
)

AFTER_LXC_CRLF = (
    b"lxc.uts.name = serving\r\n"
    b"  lxc.prlimit.memlock   =   unlimited  \r\n"
    b"lxc.rootfs.path = dir:/srv/lxc/serving/rootfs\r\n"
)

NOT_A_CONTAINER = (
    b"# /etc/sysctl.d/99-local.conf\n"
    b"vm.swappiness = 10\n"
    b"net.core.somaxconn = 4096\n"
)


# --- Discovery: a Proxmox node and a plain LXC host, as they are found ------------------------

# Proxmox 8's own device passthrough: devN entries, with and without path=.
PVE_DEV_ENTRIES = (
    b"arch: amd64\n"
    b"cores: 8\n"
    b"dev0: /dev/nvidia0,gid=44\n"
    b"dev1: path=/dev/nvidia-uvm,mode=0666\n"
    b"dev2: /dev/nvidiactl\n"
    b"hostname: llm-serve-03\n"
    b"lock: backup\n"
    b"memory: 65536\n"
    b"ostype: debian\n"
    b"rootfs: local-lvm:vm-103-disk-0,size=16G\n"
    b"tags: llm;prod\n"
    b"lxc.prlimit.memlock: 65536\n"
)

# A web front end: no GPU, tagged prod; a device rule for /dev/dri (major 226) is not NVIDIA.
PVE_WEB = (
    b"#Web front end\n"
    b"arch: amd64\n"
    b"cores: 2\n"
    b"dev0: /dev/dri/renderD128,gid=104\n"
    b"hostname: web-01\n"
    b"memory: 2048\n"
    b"ostype: alpine\n"
    b"rootfs: local-lvm:vm-104-disk-0,size=4G\n"
    b"tags: Prod web\n"
    b"lxc.cgroup2.devices.allow: c 226:128 rwm\n"
)

# GPU lines only in a snapshot and in [pve:pending]: not passed through now.
PVE_GPU_ONLY_OUTSIDE_LIVE = (
    b"arch: amd64\n"
    b"hostname: batch-01\n"
    b"memory: 4096\n"
    b"parent: with-gpu\n"
    b"rootfs: local-lvm:vm-105-disk-0,size=8G\n"
    b"\n"
    b"[with-gpu]\n"
    b"arch: amd64\n"
    b"dev0: /dev/nvidia0\n"
    b"hostname: batch-01\n"
    b"snaptime: 1764400000\n"
    b"lxc.cgroup2.devices.allow: c 195:* rwm\n"
    b"\n"
    b"[pve:pending]\n"
    b"dev0: /dev/nvidia1\n"
    b"lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n"
)

# Only nvidia-uvm's major, which the kernel assigned at load time (508 in PROC_DEVICES).
PVE_UVM_MAJOR_ONLY = (
    b"arch: amd64\n"
    b"hostname: embed-01\n"
    b"rootfs: local-lvm:vm-106-disk-0,size=8G\n"
    b"lxc.cgroup2.devices.allow: c 508:* rwm\n"
)

# Every device allowed: not evidence of a GPU.
PVE_ALL_DEVICES = (
    b"arch: amd64\n"
    b"hostname: docker-01\n"
    b"rootfs: local-lvm:vm-107-disk-0,size=8G\n"
    b"lxc.cgroup2.devices.allow: a\n"
    b"lxc.cgroup2.devices.allow: c *:* rwm\n"
    b"lxc.cap.drop:\n"
)

# A template with a GPU: never a serving container.
PVE_TEMPLATE = PVE_PLAIN.replace(b"hostname: llm-serve-01\n", b"hostname: llm-template\n") + b"template: 1\n"

PROC_DEVICES = (
    "Character devices:\n"
    "  1 mem\n"
    "  4 /dev/vc/0\n"
    "195 nvidia-frontend\n"
    "226 drm\n"
    "508 nvidia-uvm\n"
    "509 nvidia-caps\n"
    "\n"
    "Block devices:\n"
    "  8 sd\n"
    "195 nvidia-not-a-char\n"
)


def proxmox_node(node="pve-gpu-01"):
    """A Proxmox node's files: /etc/pve/lxc is pmxcfs's link to this node's directory."""
    base = "etc/pve/nodes/%s/lxc/" % node
    return {
        base + "101.conf": PVE_PLAIN,
        base + "102.conf": PVE_SNAPSHOTS,
        base + "103.conf": PVE_DEV_ENTRIES,
        base + "104.conf": PVE_WEB,
        base + "105.conf": PVE_GPU_ONLY_OUTSIDE_LIVE,
        base + "106.conf": PVE_UVM_MAJOR_ONLY,
        base + "107.conf": PVE_ALL_DEVICES,
        base + "900.conf": PVE_TEMPLATE,
        base + "101.conf.20260101-000000.gpufleet.bak": PVE_PLAIN,  # a backup is not a container
        # another node's container: not this node's to edit
        "etc/pve/nodes/pve-gpu-02/lxc/201.conf": PVE_PLAIN,
        "etc/pve/.version": "1\n",
        # Proxmox's runtime copies, regenerated at each start
        "var/lib/lxc/101/config": b"lxc.uts.name = llm-serve-01\nlxc.cgroup2.devices.allow = c 195:* rwm\n",
        "var/lib/lxc/555/config": b"lxc.uts.name = moved-away\n",
        "proc/devices": PROC_DEVICES,
    }


LXC_GPU_MOUNTS = LXC_PLAIN + (
    b"lxc.cgroup2.devices.allow = c 195:* rwm\n"
    b"lxc.mount.entry = /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
)

# LXC's nvidia hook (lxc-create ... with NVIDIA_VISIBLE_DEVICES).
LXC_NVIDIA_HOOK = (
    b"lxc.uts.name = hooked\n"
    b"lxc.hook.mount = /usr/share/lxc/hooks/nvidia\n"
    b"lxc.environment = NVIDIA_VISIBLE_DEVICES=all\n"
)

# The GPU lines live in an included file.
LXC_INCLUDES_GPU = (
    b"lxc.uts.name = included\n"
    b"lxc.include = /etc/lxc/gpu.conf.d\n"
)
LXC_GPU_INCLUDE = b"lxc.mount.entry = /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n"
