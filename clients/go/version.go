package memsvc

// Version is the contract version (proto/VERSION) this client speaks; the client's own version
// is the same (tests/e2e/test_packages.py fails when they differ).
const Version = "0.9.0"
