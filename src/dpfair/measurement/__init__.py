"""The private measurement of fairness: fairlearn's ``MetricFrame`` released with differential privacy.

* :mod:`~dpfair.measurement.frame`: :class:`PrivateMetricFrame`, one accounted release of the group × label ×
  prediction count tables (through a :class:`~dpfair.privacy.session.ReleaseSession`), every figure and interval
  computed from them;
* :mod:`~dpfair.measurement.plan`: which tables a measurement releases and how its ε is split
  (:class:`MeasurementPlan`), and choosing ε before touching data (:func:`plan_measurement`,
  :func:`epsilon_for_width`);
* :mod:`~dpfair.measurement.intervals`: intervals that include the noise and the sampling;
* :mod:`~dpfair.measurement.counts`: the exact count table of a table of predictions, streamed in record
  batches or counted on a Dask cluster;
* :mod:`~dpfair.measurement.files`: the measurement of a file of predictions or of a model on a table
  (``dpfair measure``).

Names are imported on first use, so that ``import dpfair.measurement`` loads neither the accountant nor pandas.
"""

from dpfair.utils.lazy_exports import lazy_exports

__all__ = ["DEFAULT_METRICS", "MeasurementPlan", "PrivateMetricFrame", "epsilon_for_width", "measure_counts",
           "measure_file", "measure_rows", "measurement_record", "model_counts", "plan_measurement",
           "read_predictions"]

_LAZY = {
    "PrivateMetricFrame": "dpfair.measurement.frame",
    **dict.fromkeys(("MeasurementPlan", "epsilon_for_width", "plan_measurement"), "dpfair.measurement.plan"),
    **dict.fromkeys(("DEFAULT_METRICS", "measure_counts", "measure_file", "measure_rows", "measurement_record",
                     "model_counts", "read_predictions"), "dpfair.measurement.files"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
