"""The ground every tier stands on: records, ids, units, settings, errors and
durable writes.

Must never import any other memsvc package.
"""
