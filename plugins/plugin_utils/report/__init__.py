"""The fleet page (ARTIFACTS/index.html): read the artifacts folder (collect.py), draw the charts
(charts.py), link into each host's report (anchors.py) and render the page (page.py).

Controller-side only: the action fleet_report runs it in the controller process over the
controller's own files; no module ever sends it to a node, so it lives in plugin_utils, not in
module_utils.
"""
