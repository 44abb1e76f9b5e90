"""Fake config spaces and sysfs trees of real bridge shapes with an ACS capability.

The shapes (vendor, device, port type, ACS offset, ACS Capability word):

- Broadcom/PLX PEX 87xx switch (10b5:8747), downstream port: ``Capabilities: [f24 v1] Access
  Control Services``, ``ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+
  EgressCtrl+ DirectTrans+`` (0x007f), as public ``lspci -vvv`` dumps of PEX 8724/8749
  downstream ports show it (linux-pci threads); its upstream port has no ACS here.
- AMD root port (1022:1483, the "Starship/Matisse GPP Bridge"): ``[2a0 v1] Access Control
  Services``, ``SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl-
  DirectTrans+`` (0x005f), and ``ACSCtl: SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+`` as the
  kernel leaves it with an IOMMU on, as dumps of these GPP bridges (and Raphael's) show.
- Intel Sapphire Rapids root port (8086:352a): ``[220 v1] Access Control Services``,
  ``SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-`` (0x001f).
  Not checked against a dump: replace it with a capture from the fleet when one is at hand
  (tests/unit/fixtures/pci, as for the H200s).

With an IOMMU on, the kernel (pci_std_enable_acs) sets SV, RR, CR and UF where advertised:
ACS Control 0x001d, which every bridge here starts with.
"""

from ansible_collections.gpufleet.tuning.tests.unit.pci_fake import (
    EXT_CAP_ID_ACS, EXT_CAP_ID_AER, Config, add_device, add_iommu_group, gpu_config)

KERNEL_CTRL = 0x001D  # SV | RR | CR | UF
PLX = dict(vendor=0x10B5, device=0x8747, acs_offset=0xF24, capable=0x007F)
AMD = dict(vendor=0x1022, device=0x1483, acs_offset=0x2A0, capable=0x005F)
INTEL = dict(vendor=0x8086, device=0x352A, acs_offset=0x220, capable=0x001F)
H100 = 0x2330  # hopper gh100
B200 = 0x2901  # blackwell gb100


def acs_bridge(vendor, device, acs_offset=None, capable=0, ctrl=KERNEL_CTRL, port_type=6):
    """A type 1 header bridge with Express at 0x40, AER at 0x100 and, with ``acs_offset``, ACS."""
    config = Config(vendor=vendor, device=device, class_code=0x060400, header_type=1)
    config.chain((0x40, 0x10), (0x80, 0x05)).express(0x40, devctl=0x0020, port_type=port_type)
    if acs_offset is None:
        config.extended((0x100, EXT_CAP_ID_AER, 2))
    else:
        config.extended((0x100, EXT_CAP_ID_AER, 2), (acs_offset, EXT_CAP_ID_ACS, 1))
        config.acs(acs_offset, capable=capable, ctrl=ctrl)
    return config.bytes()


def shape(kind, port_type, ctrl=KERNEL_CTRL):
    return acs_bridge(kind["vendor"], kind["device"], kind["acs_offset"], kind["capable"], ctrl, port_type)


def no_acs_bridge(port_type=6):
    """An ASMedia-like switch port (1b21:1184) without ACS."""
    return acs_bridge(0x1B21, 0x1184, None, port_type=port_type)


# Addresses of switch_node.
ROOT = "0000:00:01.1"
USP = "0000:01:00.0"
DSP0, DSP1 = "0000:02:08.0", "0000:02:10.0"
GPU0, GPU1 = "0000:03:00.0", "0000:04:00.0"


def switch_node(root, gpu_device=H100, iommu="identity", gpu_driver="nvidia"):
    """AMD root port -> PEX 8747 upstream (no ACS) -> two downstream ports -> one GPU each."""
    add_device(root, ROOT, shape(AMD, 4))
    add_device(root, USP, acs_bridge(0x10B5, 0x8747, None, port_type=5), parents=[ROOT], driver="pcieport")
    for dsp, gpu in ((DSP0, GPU0), (DSP1, GPU1)):
        add_device(root, dsp, shape(PLX, 6), parents=[ROOT, USP], driver="pcieport")
        add_device(root, gpu, gpu_config(device=gpu_device), parents=[ROOT, USP, dsp], driver=gpu_driver)
    if iommu:
        for index, gpu in enumerate((GPU0, GPU1)):
            add_iommu_group(root, gpu, 40 + index, iommu)


# Addresses of root_ports_node: two Intel root ports and one without ACS, a GPU below each.
RP0, RP1, RP2 = "0000:00:01.0", "0000:00:02.0", "0000:00:03.0"
EP0, EP1, EP2 = "0000:10:00.0", "0000:20:00.0", "0000:30:00.0"


def root_ports_node(root, with_plain=False):
    add_device(root, RP0, shape(INTEL, 4), driver="pcieport")
    add_device(root, EP0, gpu_config(device=H100), parents=[RP0], driver="nvidia")
    add_device(root, RP1, shape(INTEL, 4), driver="pcieport")
    add_device(root, EP1, gpu_config(device=H100), parents=[RP1], driver="nvidia")
    if with_plain:
        add_device(root, RP2, no_acs_bridge(port_type=4), driver="pcieport")
        add_device(root, EP2, gpu_config(device=H100), parents=[RP2], driver="nvidia")
