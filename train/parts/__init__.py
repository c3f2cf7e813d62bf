"""What is trained: the bundled models and data sets, or yours (`package.module:factory`
plug-ins), and your own loss or training step."""
