"""gateway-sizer: measure how many Envoy cores a Contour gateway needs.

The data flow is the layout: scenario -> plan -> platform (apply, load, metrics) -> measurement ->
knee -> results -> report.
"""

__version__ = "0.1.0"
