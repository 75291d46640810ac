"""Exceptions that tokendist raises.

Every error a user can cause (a malformed spec, a bad file, an algorithm that does not apply to a
graph) is a :class:`TokendistError`. The CLI prints its message as one line on stderr and exits
with code 2; the Python API lets it propagate.
"""

__all__ = ["TokendistError", "SpecError", "GraphFileError", "InfeasibleStepError", "ConservationError",
           "NotResetError"]


class TokendistError(ValueError):
    """An error caused by the user's input, reported as one line."""


class SpecError(TokendistError):
    """A spec string (topology, initial distribution, speeds, ...) that cannot be parsed."""


class GraphFileError(TokendistError):
    """A graph or load file with bad content; the message names the file and the line."""


class InfeasibleStepError(TokendistError):
    """A protocol tried to send more tokens than a node holds.

    The engine never repairs such a step silently: the run stops with this error (naming the
    step, the node and the rule) unless the caller passed ``allow_infeasible=True``.
    """

    def __init__(self, step: int, node: int, load, outflow, rule: str):
        self.step, self.node, self.load, self.outflow, self.rule = step, node, load, outflow, rule
        super().__init__(
            f"infeasible step {step}: node {node} holds {load} tokens but rule '{rule}' sends {outflow}"
            " (pass --allow-infeasible to record such steps and continue with negative loads)"
        )


class ConservationError(RuntimeError):
    """Tokens were created or lost. This is always a bug in a protocol, never a user error."""


class NotResetError(TokendistError, AttributeError):
    """A protocol used before :meth:`~tokendist.engine.Protocol.reset` gave it its per-run state.

    Also an ``AttributeError``, so that ``getattr(protocol, name, default)`` and ``hasattr`` keep
    working on a protocol that has not been reset.
    """
