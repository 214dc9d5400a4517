"""The window tier as a tenant builds it, over a temp data directory, with a real archive."""

from tests.support.window import world  # noqa: F401 (a fixture)
