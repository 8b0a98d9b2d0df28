"""A regressor for ringflow: a small network fitting a physical field u(x, t) from sampled points.

ringflow calls build(input_shape, outputs, **train.model_args): input_shape is one example's feature shape (2,:
x and t); outputs the number of targets (1: u), so the model ends in a linear layer of that width.
"""
import tensorflow as tf


def build(input_shape, outputs, units=32, layers=2):
    inputs = tf.keras.Input(input_shape)
    hidden = inputs
    for _ in range(layers):
        hidden = tf.keras.layers.Dense(units, activation="tanh")(hidden)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(outputs)(hidden))
