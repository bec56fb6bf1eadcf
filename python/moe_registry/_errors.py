"""The one exception type of the package: every failed call of the host C API, and every argument
the binding refuses, raises MoeError with the C API's status name and its message."""


class MoeError(RuntimeError):
    """A moe_registry call failed. ``status`` is the C API's status name ("invalid_argument",
    "dtype_mismatch", "shape_mismatch", "unsupported", "config_error", "not_found", ...) and
    ``message`` says what was wrong, naming the argument, key or file."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
