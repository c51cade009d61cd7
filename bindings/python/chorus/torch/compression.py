"""Gradient compression: a tensor is cast before it travels and cast back after.

The same shape as Horovod's API: ``Compression.none``, ``Compression.fp16`` (and
``Compression.bf16``) are classes whose static ``compress(tensor)`` returns the tensor to
send and a context, and whose ``decompress(tensor, ctx)`` restores the original dtype.
"""

import torch


class Compressor:
    """Base of the compression algorithms."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    wire_code = 0

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _cast_compressor(wire_dtype, code, doc):
    class _Cast(Compressor):
        __doc__ = doc
        wire_code = code

        @staticmethod
        def compress(tensor):
            if tensor.dtype.is_floating_point and tensor.dtype != wire_dtype:
                return tensor.to(wire_dtype), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else tensor.to(ctx)

    return _Cast


FP16Compressor = _cast_compressor(torch.float16, 1, "Floating-point tensors travel as float16.")
BF16Compressor = _cast_compressor(torch.bfloat16, 2, "Floating-point tensors travel as bfloat16.")
FP16Compressor.__name__ = FP16Compressor.__qualname__ = "FP16Compressor"
BF16Compressor.__name__ = BF16Compressor.__qualname__ = "BF16Compressor"


class Compression:
    """The available compressors."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
