"""The Prometheus text exposition format (0.0.4): rendering, escaping, values as Go writes them,
ordering, the names and values refused, and parse() reading back what render() wrote."""

import math

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import prometheus_text as pt


def metric(name="gpufleet_node_healthy", samples=None, **kw):
    item = dict(name=name, samples=[{"value": 1}] if samples is None else samples)
    item.update(kw)
    return item


# ------------------------------------------------------------------------------ render

def test_renders_help_type_and_samples_grouped_per_metric_in_the_order_given():
    text = pt.render([
        metric("gpufleet_node_healthy", help="1 when healthy.", samples=[{"value": 1}]),
        metric("gpufleet_audit_findings", help="Findings by severity.", samples=[
            {"labels": {"severity": "warning"}, "value": 2},
            {"labels": {"severity": "critical"}, "value": 0},
            {"labels": {"severity": "info"}, "value": 5}]),
        metric("gpufleet_runs_total", type="counter", samples=[{"value": 7}]),
    ], comments=["gpufleet.tuning marker"])
    assert text == (
        "# gpufleet.tuning marker\n"
        "# HELP gpufleet_node_healthy 1 when healthy.\n"
        "# TYPE gpufleet_node_healthy gauge\n"
        "gpufleet_node_healthy 1\n"
        "# HELP gpufleet_audit_findings Findings by severity.\n"
        "# TYPE gpufleet_audit_findings gauge\n"
        'gpufleet_audit_findings{severity="critical"} 0\n'
        'gpufleet_audit_findings{severity="info"} 5\n'
        'gpufleet_audit_findings{severity="warning"} 2\n'
        "# TYPE gpufleet_runs_total counter\n"
        "gpufleet_runs_total 7\n")


def test_labels_are_sorted_by_name_and_samples_by_their_labels():
    text = pt.render([metric("m", samples=[
        {"labels": {"gpu": "1", "bus": "0000:1b:00.0"}, "value": 0},
        {"labels": {"gpu": "0", "bus": "0000:3d:00.0"}, "value": 1},
        {"labels": {}, "value": 2}])])
    assert text.splitlines()[1:] == ["m 2", 'm{bus="0000:1b:00.0",gpu="1"} 0', 'm{bus="0000:3d:00.0",gpu="0"} 1']


def test_the_same_samples_in_another_order_render_the_same_text():
    samples = [{"labels": {"s": str(n)}, "value": n} for n in range(5)]
    assert pt.render([metric("m", samples=samples)]) == pt.render([metric("m", samples=samples[::-1])])


def test_help_and_label_values_are_escaped():
    text = pt.render([metric("m", help='line one\nback\\slash "quoted"',
                             samples=[{"labels": {"reason": 'a "b"\nc\\d'}, "value": 1}])])
    assert text == ('# HELP m line one\\nback\\\\slash "quoted"\n'
                    "# TYPE m gauge\n"
                    'm{reason="a \\"b\\"\\nc\\\\d"} 1\n')


def test_a_metric_without_help_has_only_its_type_line():
    assert pt.render([metric("m")]) == "# TYPE m gauge\nm 1\n"
    assert pt.render([metric("m", help="")]) == "# TYPE m gauge\nm 1\n"


def test_a_metric_without_samples_keeps_its_help_and_type():
    assert pt.render([metric("m", help="h", samples=[])]) == "# HELP m h\n# TYPE m gauge\n"


def test_label_values_may_be_numbers():
    assert pt.render([metric("m", samples=[{"labels": {"gpu": 0}, "value": 1}])]).endswith('m{gpu="0"} 1\n')


@pytest.mark.parametrize("value, text", [
    (0, "0"), (1, "1"), (-3, "-3"), (1767225600, "1767225600"), (10 ** 20, "100000000000000000000"),
    (1.0, "1"), (0.5, "0.5"), (-2.0, "-2"), (0.1, "0.1"), (100000.0, "100000"), (123456.5, "123456.5"),
    (1e6, "1e+06"), (1234567.0, "1.234567e+06"), (1767225600.123, "1.767225600123e+09"),
    (0.0001, "0.0001"), (0.00001, "1e-05"), (1.5e-7, "1.5e-07"), (1e300, "1e+300"), (-0.0, "-0"),
    (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (float("nan"), "NaN"),
    ("3", "3"), (" 3 ", "3"), ("+3", "3"), ("0.25", "0.25"), ("1e3", "1000"), ("2.50", "2.5"), (".5", "0.5"),
    ("+Inf", "+Inf"), ("inf", "+Inf"), ("-Inf", "-Inf"), ("NaN", "NaN"), ("nan", "NaN"),
])
def test_values_are_written_as_go_writes_a_float64(value, text):
    assert pt.sample_value(value) == text


@pytest.mark.parametrize("number", [0.1, 1 / 3, 2 ** 0.5, 6.02214076e23, 1e-300, 123456789.987654321, -42.125])
def test_written_floats_read_back_as_the_same_float(number):
    assert float(pt.sample_value(number)) == number


@pytest.mark.parametrize("value, words", [
    (True, "value True is not a number (write 1 or 0"),
    (False, "value False is not a number"),
    (None, "value None is not a number"),
    ("ok", "value 'ok' is not a number"),
    ("1,5", "value '1,5' is not a number"),
    ("0x10", "value '0x10' is not a number"),
    ("", "value '' is not a number"),
    ("1e400", "value '1e400' is too large for a float64"),
    (10 ** 400, "is too large for a float64"),
    ([1], "value [1] (list) is not a number"),
    ({"v": 1}, "(dict) is not a number"),
])
def test_values_that_are_no_number_are_refused(value, words):
    with pytest.raises(ValueError) as exc:
        pt.sample_value(value)
    assert words in str(exc.value)


@pytest.mark.parametrize("name", ["m", "_m", ":m", "gpufleet:node_healthy", "a1_b2", "A"])
def test_metric_names_accepted(name):
    assert pt.metric_name(name) == name


@pytest.mark.parametrize("name", ["", "1m", "m-x", "m x", "m.x", "m\n", "é", None, 3])
def test_metric_names_refused(name):
    with pytest.raises(ValueError) as exc:
        pt.metric_name(name)
    assert "metric name %r is not valid ([a-zA-Z_:][a-zA-Z0-9_:]*)" % (name,) in str(exc.value)


@pytest.mark.parametrize("name", ["gpu", "_x", "severity", "a1", "le"])
def test_label_names_accepted(name):
    assert pt.label_name(name) == name


@pytest.mark.parametrize("name", ["__name__", "__x", "", "1a", "a:b", "a-b", "a\n", None])
def test_label_names_refused(name):
    with pytest.raises(ValueError) as exc:
        pt.label_name(name)
    assert "label name %r is not valid" % (name,) in str(exc.value) and "not starting with __" in str(exc.value)


@pytest.mark.parametrize("metrics, words", [
    ([metric("bad-name")], "metrics[0]: metric name 'bad-name' is not valid"),
    ([metric("m", type="histogram")], "metrics[0] (m): type 'histogram' is not one of gauge, counter, untyped"),
    ([metric("m"), metric("m")], "metrics[1] (m): metric m is given twice (also metrics[0])"),
    ([metric("m", samples=[{"labels": {"__x": "1"}, "value": 1}])],
     "metrics[0] (m): samples[0]: label name '__x' is not valid"),
    ([metric("m", samples=[{"labels": {"gpu": None}, "value": 1}])],
     "metrics[0] (m): samples[0]: label gpu=None: a label value is text or a number"),
    ([metric("m", samples=[{"labels": {"ok": True}, "value": 1}])], "label ok=True: a label value is text or a number"),
    ([metric("m", samples=[{"labels": ["gpu"], "value": 1}])], "labels ['gpu'] are not a mapping"),
    ([metric("m", samples=[{"value": "up"}])], "metrics[0] (m): samples[0]: value 'up' is not a number"),
    ([metric("m", samples=[{"labels": {}}])], "metrics[0] (m): samples[0]: no value"),
    ([metric("m", samples=[{"value": 1, "vaule": 2}])], "samples[0]: unknown key vaule"),
    ([metric("m", samples=[1])], "metrics[0] (m): samples[0]=1 is not a mapping"),
    ([metric("m", samples={"value": 1})], "metrics[0] (m): samples {'value': 1} are not a list"),
    ([metric("m", samples=[{"labels": {"gpu": "0"}, "value": 1}, {"labels": {"gpu": 0}, "value": 2}])],
     'metrics[0] (m): samples[1] repeats the labels of samples[0]: m{gpu="0"}'),
    ([metric("m", samples=[{"value": 1}, {"labels": {}, "value": 2}])], "samples[1] repeats the labels of samples[0]: m"),
    ([metric("m", help=3)], "metrics[0] (m): help 3 is not text"),
    ([metric("m", help="\udcff")], "is not valid UTF-8 text"),
    ([metric("m", sample=[])], "metrics[0]: unknown key sample"),
    (["m"], "metrics[0]='m' is not a mapping"),
    ({"name": "m"}, "are not a list"),
])
def test_bad_metrics_are_refused_naming_the_bad_part(metrics, words):
    with pytest.raises(ValueError) as exc:
        pt.render(metrics)
    assert words in str(exc.value), str(exc.value)


@pytest.mark.parametrize("comment", ["HELP m x", "TYPE m gauge", "a\nb", "a\rb"])
def test_a_comment_cannot_look_like_a_directive_or_break_the_line(comment):
    with pytest.raises(ValueError):
        pt.render([metric("m")], comments=[comment])


def test_nothing_renders_as_nothing():
    assert pt.render([]) == ""


# ------------------------------------------------------------------------------ parse

def test_parse_reads_back_what_render_wrote():
    metrics = [
        metric("gpufleet_node_healthy", help="h\\n", samples=[{"value": 0}]),
        metric("gpufleet_gpu_xid", samples=[{"labels": {"gpu": "1", "reason": 'say "hi"\\\n'}, "value": 79},
                                            {"labels": {"gpu": "0", "reason": ""}, "value": float("nan")}]),
        metric("gpufleet_last_run_timestamp_seconds", samples=[{"value": 1767225600.5}]),
        metric("gpufleet_inf", samples=[{"labels": {"x": "}{,=\t"}, "value": float("-inf")}]),
    ]
    text = pt.render(metrics, comments=["marker"])
    assert pt.parse(text) == [
        ("gpufleet_node_healthy", {}, "0"),
        ("gpufleet_gpu_xid", {"gpu": "0", "reason": ""}, "NaN"),
        ("gpufleet_gpu_xid", {"gpu": "1", "reason": 'say "hi"\\\n'}, "79"),
        ("gpufleet_last_run_timestamp_seconds", {}, "1.7672256005e+09"),
        ("gpufleet_inf", {"x": "}{,=\t"}, "-Inf"),
    ]


def test_parse_reads_what_other_programs_write():
    text = ("# a comment\n\n"
            "#  HELP  m  some text\n"
            "# TYPE m counter\n"
            'm { b = "2" , a="1", } 3.5 1767225600000\n'
            "m\t4\n"
            "other_metric{x=\"y\"} +Inf\n"
            "# TYPE h histogram\n"
            'h_bucket{le="0.5"} 1\n')
    assert pt.parse(text) == [("m", {"a": "1", "b": "2"}, "3.5"), ("m", {}, "4"),
                              ("other_metric", {"x": "y"}, "+Inf"), ("h_bucket", {"le": "0.5"}, "1")]


@pytest.mark.parametrize("text, words", [
    ("m\n", "line 1: sample m has no value"),
    ("m x\n", "line 1: sample m has the value 'x', not a number"),
    ("m{a=1} 1\n", "line 1: the value of label a is not quoted"),
    ('m{a="1} 1\n', "line 1: the value of label a has no closing quote"),
    ('m{a="1" b="2"} 1\n', "line 1: ',' or '}' is expected after label a"),
    ('m{a="1",a="2"} 1\n', "line 1: label a is given twice"),
    ('m{__a="1"} 1\n', "line 1: label name '__a' is not valid"),
    ('m{="1"} 1\n', "line 1: a label name is expected"),
    ('m{a} 1\n', "line 1: '=' is expected after label a"),
    ("m 1 2 3\n", "line 1: '2 3' after the value of m is not a timestamp"),
    ("# TYPE m gauge\nm 1\nm 2\n", "line 3: sample m is given twice"),
    ("# TYPE m gauge\n# TYPE m gauge\n", "line 2: a second # TYPE for m"),
    ("# HELP m a\n# HELP m b\n", "line 2: a second # HELP for m"),
    ("# TYPE m gauge2\n", "line 1: # TYPE m 'gauge2' is not a type"),
    ("# TYPE 1m gauge\n", "line 1: # TYPE names no valid metric"),
    ("# HELP\n", "line 1: # HELP names no valid metric"),
    ("m 1\n# TYPE m gauge\n", "line 2: # TYPE m comes after its samples"),
    ("1m 1\n", "line 1: not a sample, a comment or blank"),
    ("m+Inf\n", "line 1: a blank is expected before the value"),
])
def test_parse_refuses_what_the_format_does_not_allow(text, words):
    with pytest.raises(ValueError) as exc:
        pt.parse(text)
    assert words in str(exc.value), str(exc.value)


def test_parse_of_nothing_is_nothing():
    assert pt.parse("") == [] and pt.parse("# only a comment\n\n") == []


def test_sample_key_is_the_sample_line_without_its_value():
    assert pt.sample_key("m", {}) == "m"
    assert pt.sample_key("m", {"b": "2", "a": 'x"'}) == 'm{a="x\\"",b="2"}'


# ------------------------------------------------------------------------------ masked

def test_masked_blanks_only_the_named_metrics_values():
    text = pt.render([metric("keep", samples=[{"value": 1}]),
                      metric("beat", samples=[{"value": 1767225600}, {"labels": {"role": "audit"}, "value": 5}])])
    assert pt.masked(text, ["beat"]) == ("# TYPE keep gauge\nkeep 1\n# TYPE beat gauge\nbeat _\n"
                                         'beat{role="audit"} _\n')
    assert pt.masked(text, []) == text


def test_masked_makes_two_texts_equal_when_only_those_values_differ():
    one = pt.render([metric("keep"), metric("beat", samples=[{"value": 1.5}])])
    two = pt.render([metric("keep"), metric("beat", samples=[{"value": 2 ** 31}])])
    three = pt.render([metric("keep", samples=[{"value": 0}]), metric("beat", samples=[{"value": 2}])])
    assert pt.masked(one, ["beat"]) == pt.masked(two, ["beat"])
    assert pt.masked(one, ["beat"]) != pt.masked(three, ["beat"])


def test_masked_leaves_lines_that_do_not_parse():
    assert pt.masked("beat{x 1\nbeat 2\n", ["beat"]) == "beat{x 1\nbeat _\n"


def test_nan_compares_as_text():
    assert pt.sample_value(float("nan")) == pt.sample_value("NaN") == "NaN"
    assert math.isnan(float(pt.sample_value(float("nan"))))
