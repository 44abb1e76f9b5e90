"""XID events from a fake /dev/kmsg (a regular file of records) and fake syslog files."""

import errno
import os
import time

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_log
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree

GPUS = ["0000:01:00.0", "0000:2b:00.0", "0000:41:00.0", "0000:9b:00.0"]
BOOT = int(time.time()) - 7200  # booted two hours ago
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Every shape the driver has printed, as (message, bdf, code, last_message).
SHAPES = [
    ("NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.",
     "0000:41:00.0", 79, "GPU has fallen off the bus."),
    ("NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
     "0000:2b:00.0", 79, "GPU has fallen off the bus."),
    ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
     "0000:10:1c.0", 63, "Row Remapper: New row marked for remapping, reset gpu to activate."),
    ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2114, name=python3, Timeout after 6s of waiting for RPC response from "
     "GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
     "0000:9b:00.0", 119, "Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 "
     "(GSP_RM_CONTROL) (0x20800a4c 0x4)."),
    ("NVRM: Xid (PCI:0000:3b:00): 94, pid='<unknown>', name=<unknown>, Contained: CE User Channel (0x2). "
     "RST: No, D-RST: No",
     "0000:3b:00.0", 94, "Contained: CE User Channel (0x2). RST: No, D-RST: No"),
    ("NVRM: Xid (PCI:0000:01:00): 31, pid=1234, name=python, Ch 00000010, intr 00000000. MMU Fault: ENGINE "
     "GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f7d_86a00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
     "0000:01:00.0", 31, "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
     "0x7f7d_86a00000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"),
    ("NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff",
     "0000:01:00.0", 3, "C 00000005 SC 00000007 M 00001ffc Data ffffffff"),
    ("NVRM: Xid (PCI:10000:01:00): 48, pid=77, name=vllm, An uncorrectable double bit error (DBE) has been detected.",
     "10000:01:00.0", 48, "An uncorrectable double bit error (DBE) has been detected."),
]


def record(seq, usec, message, prio=4, dictionary=()):
    """One /dev/kmsg record: header, message, and its dictionary lines."""
    return "%d,%d,%d,-;%s\n" % (prio, seq, usec, message) + "".join(" %s\n" % item for item in dictionary)


def kmsg(*records):
    return "".join(record(*item) if isinstance(item, tuple) else item for item in records)


def tree(tmp_path, kmsg_text=None, kern_log=None, messages=None, btime=BOOT):
    files = {"proc/stat": "cpu  1 2 3\nbtime %d\nprocesses 42\n" % btime if btime is not None else "cpu 1\n"}
    if kmsg_text is not None:
        files["dev/kmsg"] = kmsg_text
    if kern_log is not None:
        files["var/log/kern.log"] = kern_log
    if messages is not None:
        files["var/log/messages"] = messages
    write_tree(tmp_path, files)
    return str(tmp_path)


def values(result):
    return {key: envelope["value"] for key, envelope in result.items()}


def by_key(result):
    return {(event["bdf"], event["code"]): event for event in result["xid"]["value"]}


def rfc3339(epoch, message, host="gpu7"):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))
    return "%s.%06d+00:00 %s %s\n" % (stamp, int(round((epoch % 1) * 1e6)), host, message)


def traditional(epoch, message, host="gpu7"):
    local = time.localtime(epoch)
    return "%s %2d %s %s %s\n" % (MONTHS[local.tm_mon - 1], local.tm_mday, time.strftime("%H:%M:%S", local),
                                  host, message)


def refuse_kmsg(monkeypatch, exc_type=PermissionError, number=errno.EPERM):
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):
        if str(path).endswith("dev/kmsg"):
            raise exc_type(number, os.strerror(number), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


# --- /dev/kmsg ----------------------------------------------------------------------------


def test_every_message_shape_is_read(tmp_path):
    root = tree(tmp_path, kmsg(*[(seq, 1000000 * (seq + 1), shape[0]) for seq, shape in enumerate(SHAPES)]))
    result = kernel_log.gather(root, GPUS)
    assert values(result)["kernel_log"] == "/dev/kmsg"
    assert result["xid"]["source"] == "/dev/kmsg"
    events = by_key(result)
    assert sorted(events) == sorted((bdf, code) for _message, bdf, code, _text in SHAPES)
    for _message, bdf, code, text in SHAPES:
        assert events[(bdf, code)]["last_message"] == text
        assert events[(bdf, code)]["count"] == 1
    assert events[("0000:41:00.0", 79)]["gpu"] == 2
    assert events[("0000:9b:00.0", 119)]["gpu"] == 3
    assert events[("0000:01:00.0", 31)]["gpu"] == 0
    assert events[("0000:01:00.0", 3)]["gpu"] == 0  # the old shape without PCI:
    assert events[("0000:41:00.0", 79)]["first_s"] == 1.0
    assert values(result)["xid_total"] == len(SHAPES)
    # sorted by bus number, then code; the 5-digit VMD domain after domain 0000
    listed = [(event["bdf"], event["code"]) for event in result["xid"]["value"]]
    assert listed[:2] == [("0000:01:00.0", 3), ("0000:01:00.0", 31)]
    assert listed[-1] == ("10000:01:00.0", 48)


def test_events_grouped_by_gpu_and_code_with_first_and_last_time(tmp_path):
    root = tree(tmp_path, kmsg(
        (0, 5000000, "Linux version 6.8.0"),
        (1, 1234567000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus."),
        (2, 1240000000, "NVRM: Xid (PCI:0000:9b:00): 119, pid=1, name=a, Timeout after 6s (first)."),
        (3, 1250000000, "NVRM: Xid (PCI:0000:41:00): 13, pid=5, name=b, Graphics SM Warp Exception"),
        (4, 1260000000, "NVRM: Xid (PCI:0000:9b:00): 119, pid=2, name=a, Timeout after 6s (second)."),
        (5, 1270000000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus again."),
        (6, 1300100000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus (last)."),
    ))
    result = kernel_log.gather(root, GPUS)
    assert result["xid"]["value"] == [
        {"bdf": "0000:41:00.0", "gpu": 2, "code": 13, "count": 1, "first_s": 1250.0, "last_s": 1250.0,
         "last_message": "Graphics SM Warp Exception"},
        {"bdf": "0000:41:00.0", "gpu": 2, "code": 79, "count": 3, "first_s": 1234.567, "last_s": 1300.1,
         "last_message": "GPU has fallen off the bus (last)."},
        {"bdf": "0000:9b:00.0", "gpu": 3, "code": 119, "count": 2, "first_s": 1240.0, "last_s": 1260.0,
         "last_message": "Timeout after 6s (second)."},
    ]
    assert values(result)["xid_total"] == 6
    assert values(result)["kernel_log_complete"] is True  # seq 0 first, nothing overwritten


def test_an_address_of_no_gpu_has_gpu_none_and_a_normalised_bdf(tmp_path):
    root = tree(tmp_path, kmsg((0, 1000000, "NVRM: Xid (PCI:0000:AB:1C): 62, pid=9, name=x, PMU halt"),
                               (1, 2000000, "NVRM: Xid (PCI:0000:41:00): 62, pid=9, name=x, PMU halt")))
    events = by_key(kernel_log.gather(root, ["0000:41:00.0"]))
    assert events[("0000:ab:1c.0", 62)]["gpu"] is None
    assert events[("0000:41:00.0", 62)]["gpu"] == 0
    # without GPUs every event is unmatched, and upper-case sysfs names match too
    assert by_key(kernel_log.gather(root))[("0000:41:00.0", 62)]["gpu"] is None
    assert by_key(kernel_log.gather(root, ["0000:41:00.0", "0000:AB:1C.0"]))[("0000:ab:1c.0", 62)]["gpu"] == 1


def test_sxid_of_an_nvswitch_and_other_programs_lines_are_not_counted(tmp_path):
    root = tree(tmp_path, kmsg(
        (0, 1000000, "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV"),
        (1, 2000000, "nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"),
        # a program writing to /dev/kmsg (facility user, 8 + level) is not the driver
        (2, 3000000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.", 12),
        (3, 4000000, "NVRM: GPU at PCI:0000:41:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae"),
    ))
    result = kernel_log.gather(root, GPUS)
    assert values(result)["xid"] == []
    assert values(result)["xid_total"] == 0
    assert values(result)["kernel_log_complete"] is True


def test_dictionary_lines_are_skipped(tmp_path):
    root = tree(tmp_path, kmsg(
        (0, 1000000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.", 4,
         ("SUBSYSTEM=pci", "DEVICE=+pci:0000:41:00.0",
          "NOTE=NVRM: Xid (PCI:0000:41:00): 48, pid=0, a dictionary value, not a message")),
        (1, 2000000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.", 4,
         ("SUBSYSTEM=pci", "DEVICE=+pci:0000:41:00.0")),
    ))
    result = kernel_log.gather(root, GPUS)
    assert [(e["code"], e["count"]) for e in result["xid"]["value"]] == [(79, 2)]
    assert values(result)["xid_total"] == 2


def test_a_wrapped_ring_buffer_fragment_is_not_counted_and_the_log_is_incomplete(tmp_path):
    root = tree(tmp_path, "ci:00): 79, pid=0, GPU has fallen off the bus.\n" + kmsg(
        (5120, 900000000, "NVRM: Xid (PCI:0000:41:00): 94, pid=3, name=x, Contained: SM (0x1). RST: No, D-RST: No"),
        (5121, 900000001, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus."),
    ))
    result = kernel_log.gather(root, GPUS)
    assert [(e["code"], e["count"]) for e in result["xid"]["value"]] == [(79, 1), (94, 1)]
    assert values(result)["kernel_log_complete"] is False  # the first record is not seq 0


def test_a_record_cut_at_the_end_is_not_counted(tmp_path):
    root = tree(tmp_path, kmsg((0, 1000000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus."))
                + "4,1,2000000,-;NVRM: Xid (PCI:0000:41:00): 4")
    result = kernel_log.gather(root, GPUS)
    assert [(e["code"], e["count"]) for e in result["xid"]["value"]] == [(79, 1)]


def test_a_line_cut_before_the_comma_is_not_an_xid(tmp_path):
    # a record header with a message cut after the code (no comma) and one with a bad address
    root = tree(tmp_path, kmsg((0, 1000000, "NVRM: Xid (PCI:0000:41:00): 7"),
                               (1, 2000000, "NVRM: Xid (PCI:0000:41): 79, GPU has fallen off the bus."),
                               (2, 3000000, "NVRM: Xid (PCI:0000:41:00): , pid=0")))
    assert values(kernel_log.gather(root, GPUS))["xid"] == []


def test_escaped_bytes_are_unescaped_in_the_message(tmp_path):
    root = tree(tmp_path, kmsg(
        (0, 1000000, r"NVRM: Xid (PCI:0000:41:00): 13, pid=9, name=caf\xc3\xa9, path C:\x5cdata\x09tab \xZZ \xff"),
    ))
    event = kernel_log.gather(root, GPUS)["xid"]["value"][0]
    assert event["last_message"] == "path C:\\data\ttab \\xZZ \ufffd"


def test_a_long_message_is_cut_to_300_characters(tmp_path):
    root = tree(tmp_path, kmsg((0, 1000000, "NVRM: Xid (PCI:0000:41:00): 31, pid=1, " + "x" * 1000)))
    assert kernel_log.gather(root, GPUS)["xid"]["value"][0]["last_message"] == "x" * 300


def test_epipe_while_reading_keeps_reading_and_marks_incomplete(tmp_path, monkeypatch):
    lines = [(seq, 1000000 * (seq + 1), "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus. %04d"
              % seq) for seq in range(400)]  # about 30 KiB: several reads
    root = tree(tmp_path, kmsg(*lines))
    real_read = os.read
    calls = []

    def read(fd, size):
        calls.append(size)
        if len(calls) == 2:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", read)
    result = kernel_log.gather(root, GPUS)
    event = result["xid"]["value"][0]
    assert (event["count"], event["first_s"], event["last_s"]) == (400, 1.0, 400.0)
    assert event["last_message"] == "GPU has fallen off the bus. 0399"
    assert values(result)["kernel_log_complete"] is False
    assert len(calls) > 3


def test_max_bytes_stops_reading_and_marks_incomplete(tmp_path):
    lines = [(seq, 1000000 * (seq + 1), "NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus. %04d"
              % seq) for seq in range(400)]
    root = tree(tmp_path, kmsg(*lines))
    result = kernel_log.gather(root, GPUS, max_bytes=10000)
    event = result["xid"]["value"][0]
    # two reads of 8 KiB: the records those hold, the one cut at the end not counted
    assert event["count"] == kmsg(*lines)[:16384].count("\n") < 400
    assert event["first_s"] == 1.0
    assert values(result)["kernel_log_complete"] is False
    assert values(kernel_log.gather(root, GPUS))["kernel_log_complete"] is True
    assert by_key(kernel_log.gather(root, GPUS))[("0000:41:00.0", 79)]["count"] == 400
    with pytest.raises(ValueError, match="max_bytes"):
        kernel_log.gather(root, GPUS, max_bytes=0)


def test_an_empty_kmsg_counts_as_unreadable(tmp_path):
    # /dev/null or the console in a container's /dev/kmsg: no records, so the next source is read
    root = tree(tmp_path, "", kern_log=traditional(BOOT + 100, "kernel: Linux version 6.8.0"))
    result = kernel_log.gather(root, GPUS)
    assert values(result)["kernel_log"] == "/var/log/kern.log"


# --- text logs ----------------------------------------------------------------------------


def test_kmsg_refused_falls_back_to_kern_log(tmp_path, monkeypatch):
    root = tree(tmp_path, kmsg((0, 1000000, "NVRM: Xid (PCI:0000:41:00): 48, pid=1, a DBE")), kern_log="".join([
        rfc3339(BOOT - 600.25, "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus."),
        rfc3339(BOOT + 5, "kernel: Linux version 6.8.0"),
        rfc3339(BOOT + 100.5, "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus."),
        rfc3339(BOOT + 200.25, "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus!"),
    ]))
    refuse_kmsg(monkeypatch)
    result = kernel_log.gather(root, GPUS)
    assert values(result)["kernel_log"] == "/var/log/kern.log"
    assert result["xid"]["source"] == "/var/log/kern.log"
    assert result["xid"]["value"] == [
        {"bdf": "0000:41:00.0", "gpu": 2, "code": 79, "count": 2, "first_s": 100.5, "last_s": 200.25,
         "last_message": "GPU has fallen off the bus!"}]
    assert values(result)["kernel_log_complete"] is True  # it has a line from before this boot


def test_traditional_timestamps_and_printk_times(tmp_path, monkeypatch):
    root = tree(tmp_path, kern_log="".join([
        traditional(BOOT - 3600, "kernel: [ 9000.000001] NVRM: Xid (PCI:0000:41:00): 48, pid=1, before this boot"),
        traditional(BOOT + 30, "kernel: [   12.500000] NVRM: Xid (PCI:0000:9b:00): 119, pid=1, with printk time"),
        traditional(BOOT + 60, "kernel: NVRM: Xid (PCI:0000:9b:00): 119, pid=1, without printk time"),
        traditional(BOOT + 90, "nvidia-dcgm[812]: NVRM: Xid (PCI:0000:9b:00): 119, quoted by another program"),
        "garbage without a timestamp NVRM: Xid (PCI:0000:9b:00): 119, pid=1, x\n",
        traditional(BOOT + 120, "kernel: nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal"),
    ]))
    refuse_kmsg(monkeypatch, FileNotFoundError, errno.ENOENT)
    result = kernel_log.gather(root, GPUS)
    assert result["xid"]["value"] == [
        {"bdf": "0000:9b:00.0", "gpu": 3, "code": 119, "count": 2, "first_s": 12.5, "last_s": 60.0,
         "last_message": "without printk time"}]
    assert values(result)["kernel_log_complete"] is True


def test_a_text_log_that_starts_in_this_boot_is_incomplete(tmp_path):
    root = tree(tmp_path, kern_log="".join([
        rfc3339(BOOT + 40, "kernel: NVRM: Xid (PCI:0000:41:00): 94, pid=3, name=x, Contained: SM (0x1)."),
    ]))
    result = kernel_log.gather(root, GPUS)
    assert values(result)["kernel_log"] == "/var/log/kern.log"
    assert values(result)["kernel_log_complete"] is False
    assert values(result)["xid_total"] == 1


def test_a_text_log_tail_drops_its_cut_first_line_and_an_unfinished_last_line(tmp_path):
    before = rfc3339(BOOT - 60, "kernel: something before this boot")
    wanted = rfc3339(BOOT + 10, "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.")
    cut = rfc3339(BOOT + 20, "kernel: NVRM: Xid (PCI:0000:2b:00): 31, pid=0, MMU Fault")
    log = before + rfc3339(BOOT + 5, "kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1, SM Warp Exception") + wanted
    unfinished = cut[:-20]  # the last line, still being written
    root = tree(tmp_path, kern_log=log + unfinished)
    tail = len(unfinished) + len(wanted) + 30  # the part read starts 30 bytes before the end of the Xid 13 line
    result = kernel_log.gather(root, GPUS, max_bytes=tail)
    assert [(e["bdf"], e["code"]) for e in result["xid"]["value"]] == [("0000:41:00.0", 79)]
    assert values(result)["kernel_log_complete"] is False  # the line before boot was not read
    # read whole: the Xid 13 counts and the pre-boot line makes it complete; the cut line never counts
    whole = kernel_log.gather(root, GPUS)
    assert [(e["bdf"], e["code"]) for e in whole["xid"]["value"]] == [("0000:01:00.0", 13), ("0000:41:00.0", 79)]
    assert values(whole)["kernel_log_complete"] is True


def test_a_stale_kern_log_falls_through_to_messages(tmp_path):
    root = tree(tmp_path, kern_log=rfc3339(BOOT - 900, "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=0, old"),
                messages=traditional(BOOT - 100, "kernel: Linux version 6.8.0")
                + traditional(BOOT + 100, "kernel: NVRM: Xid (PCI:0000:41:00): 95, pid=0, Uncontained: FBHUB."))
    result = kernel_log.gather(root, GPUS)
    assert values(result)["kernel_log"] == "/var/log/messages"
    assert [(e["code"], e["first_s"], e["last_message"]) for e in result["xid"]["value"]] == [
        (95, 100.0, "Uncontained: FBHUB.")]


def test_nothing_readable_is_unknown_with_each_sources_reason(tmp_path, monkeypatch):
    root = tree(tmp_path, kmsg((0, 1000000, "NVRM: Xid (PCI:0000:41:00): 79, pid=0, x")),
                kern_log=rfc3339(BOOT - 900, "kernel: Linux version 6.8.0"))
    refuse_kmsg(monkeypatch)
    result = kernel_log.gather(root, GPUS)
    assert set(result) == {"kernel_log", "kernel_log_complete", "xid", "xid_total"}
    reason = result["xid"]["unknown"]
    assert reason == (
        "/dev/kmsg: Operation not permitted (reading it needs CAP_SYSLOG or kernel.dmesg_restrict=0); "
        "/var/log/kern.log has no line from this boot (the syslog daemon does not write it now); "
        "/var/log/messages does not exist; /var/log/syslog does not exist")
    for envelope in result.values():
        assert envelope == {"value": None, "source": "/dev/kmsg", "unknown": reason}


def test_without_btime_the_text_logs_cannot_be_read(tmp_path, monkeypatch):
    root = tree(tmp_path, kern_log=rfc3339(BOOT + 100, "kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=0, x"),
                btime=None)
    refuse_kmsg(monkeypatch, PermissionError, errno.EACCES)
    reason = kernel_log.gather(root, GPUS)["kernel_log"]["unknown"]
    assert reason.startswith("/dev/kmsg: Permission denied (reading it needs CAP_SYSLOG")
    assert "/var/log/kern.log: which lines are of this boot is unknown: /proc/stat has no btime line" in reason


def test_an_unreadable_text_log_names_the_error(tmp_path, monkeypatch):
    root = tree(tmp_path)
    os.makedirs(os.path.join(root, "var/log/kern.log"))
    refuse_kmsg(monkeypatch, FileNotFoundError, errno.ENOENT)
    reason = kernel_log.gather(root, GPUS)["kernel_log"]["unknown"]
    assert reason == ("/dev/kmsg does not exist; /var/log/kern.log: is a directory, not a log file (EISDIR); "
                      "/var/log/messages does not exist; /var/log/syslog does not exist")
