"""Data: dataset sources, conversion to sharded TFRecords with a manifest, and validation of the shards."""
