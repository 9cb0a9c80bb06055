"""The tuner: a calibrated α-β-γ cost model that predicts each algorithm's time from its schedules and picks the fastest."""

from __future__ import annotations

from meshcomm.tuner.choose import Chooser
from meshcomm.tuner.model import DEFAULTS, Link, Parameters, load, save
from meshcomm.tuner.predict import predict

__all__ = ["DEFAULTS", "Chooser", "Link", "Parameters", "load", "predict", "save"]
