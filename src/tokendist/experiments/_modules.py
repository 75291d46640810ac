"""Imports every reproduction module so that their entries register (one module per paper)."""

from . import _repro_table1, _repro_houle, _repro_margara, _repro_subramanian, _repro_elsasser, _repro_ghosh  # noqa: F401
from . import _repro_sos_iou  # noqa: F401
from . import _repro_modern  # noqa: F401
