"""Pure conversion logic (manifests, labels, splits, shards, images, records) and the Beam
steps that wrap it. Nothing here imports TensorFlow."""
