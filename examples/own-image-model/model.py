"""A Keras model of your own for ringflow: a subclassed model with its own train_step (the tutorials' way).

ringflow calls build(input_shape, outputs, **train.model_args): input_shape is one image's (H, W, C), its pixels
raw 0..255 floats; outputs is the number of classes, so the model ends in probabilities.
"""
import tensorflow as tf


class SmallNet(tf.keras.Model):
    """Two convolutions and a dense head, trained by its own step."""

    def __init__(self, outputs: int, filters: int, units: int) -> None:
        super().__init__()
        self.conv1 = tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu")
        self.conv2 = tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu")
        self.flat = tf.keras.layers.Flatten()
        self.hidden = tf.keras.layers.Dense(units, activation="relu")
        self.out = tf.keras.layers.Dense(outputs, activation="softmax")

    def call(self, images, training=False):
        x = self.conv2(self.conv1(images / 255.0))
        return self.out(self.hidden(self.flat(x)))

    def train_step(self, data):
        images, labels = data
        with tf.GradientTape() as tape:
            predicted = self(images, training=True)
            loss = self.compiled_loss(labels, predicted)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        self.compiled_metrics.update_state(labels, predicted)
        return {metric.name: metric.result() for metric in self.metrics}


def build(input_shape, outputs, filters=8, units=32):
    model = SmallNet(outputs, filters, units)
    model.build((None, *input_shape))
    return model
