"""Your model: ringflow calls build(input_shape, outputs, **train.model_args) on every rank and trains what it
returns (docs/your-model.md). input_shape is one example's shape (an image's (H, W, C), raw 0..255 pixels as floats;
or a feature tensor's); outputs is the number of classes (the model ends in probabilities) or of targets."""
import tensorflow as tf


def build(input_shape, outputs, filters=16, units=64):
    """A small convolutional network for the built-in digits (8x8 grey images, ten classes): change it freely."""
    return tf.keras.Sequential([
        tf.keras.Input(input_shape),
        tf.keras.layers.Rescaling(1 / 255),
        tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(units, activation="relu"),
        tf.keras.layers.Dense(outputs, activation="softmax"),
    ])
