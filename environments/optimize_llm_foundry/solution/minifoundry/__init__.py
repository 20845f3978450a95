"""minifoundry: a small plain-PyTorch stand-in for LLM Foundry, used only by the smoke profile.

It follows the same three stages as the gpu profile's LLM Foundry run (tokenize the finetuning
data, train with a YAML-like config, convert the checkpoint to a Hugging-Face-style folder) on a
tiny LLaMA-shaped model, so that `finetune.sh` has the same shape in both profiles.
"""
