"""The record format: tf.train.Example features and TFRecord framing, without TensorFlow."""
