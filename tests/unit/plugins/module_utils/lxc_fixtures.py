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
