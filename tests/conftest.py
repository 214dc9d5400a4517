"""The suite's shared fixtures live in tests/support; this only registers them."""

pytest_plugins = ["tests.support", "tests.support.llm_server", "tests.support.json_server",
                  "tests.support.certificates", "tests.support.browser", "tests.support.postgres",
                  "tests.support.lessons", "tests.support.responses_server"]
