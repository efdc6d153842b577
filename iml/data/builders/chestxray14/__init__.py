"""ChestX-ray14 builder package (the builder is :mod:`.chestxray14_dataset_builder`)."""
