"""Example models from outside lmcflow (examples/any_model.yaml): a user's own network (``net``) and a width-scaled
torchvision ResNet-18 (``resnets``)."""
