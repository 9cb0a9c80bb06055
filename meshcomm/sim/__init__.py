"""meshcomm sim: collectives replayed on the cost model for topologies no machine here has."""

from meshcomm.sim.engine import Prediction, simulate
from meshcomm.sim.topology import PRESETS, Topology

__all__ = ["PRESETS", "Prediction", "Topology", "simulate"]
