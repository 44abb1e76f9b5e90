"""verify_failures names the causes of a diagnosed P2P shortfall; staged pairs are no failure."""

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.verify_failures import verify_failures

CAUSE = {"id": "acs_redirect", "summary": "ACS request_redirect set on 0000:02:08.0 between the GPUs",
         "values": {"bridges": []}, "fix": "gpufleet.tuning.pcie_acs: clear ACS redirect on those bridges"}


def test_a_diagnosed_shortfall_names_each_cause_and_its_fix():
    p2p = {"shortfalls": [{"pair": "1->3", "metric": "peer_access",
                           "reason": "GPU 1 cannot access GPU 3's memory directly; why: acs_redirect",
                           "causes": [CAUSE]}]}
    lines = verify_failures({"p2p": p2p, "readback": {}})
    assert lines == ["p2p 1->3: GPU 1 cannot access GPU 3's memory directly - why: acs_redirect (ACS "
                     "request_redirect set on 0000:02:08.0 between the GPUs; fix: gpufleet.tuning.pcie_acs: "
                     "clear ACS redirect on those bridges)"]


def test_a_shortfall_without_causes_reads_as_before():
    p2p = {"shortfalls": [{"pair": "0->1", "reason": "120.0 GB/s over nvlink is below the 380.0 GB/s floor",
                           "causes": []}]}
    assert verify_failures({"p2p": p2p, "readback": {}}) == [
        "p2p 0->1: 120.0 GB/s over nvlink is below the 380.0 GB/s floor"]


def test_staged_pairs_are_no_failure():
    p2p = {"shortfalls": [], "no_peer_access": "staged",
           "staged_pairs": [{"pair": "1<->3", "causes": [CAUSE]}]}
    assert verify_failures({"p2p": p2p, "readback": {}}) == []
