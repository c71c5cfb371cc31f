/* Internal to model_io/: constants of an ONNX graph (onnx_const.c): the shapes and pads
 * torch.onnx.export computes with small constant sub-graphs, folded into plain numbers before
 * the walk (onnx_read.c) reads the layers. Uses onnx_io.h only; onnx_io.c knows nothing of
 * folding. */
#ifndef HET_MODEL_IO_ONNX_CONST_H
#define HET_MODEL_IO_ONNX_CONST_H

#include "model_io/onnx_io.h"

/* Node i, a Shape of the walk's current value: its output becomes the constant
 * [HET_ONNX_SYM_N, C, H, W] (or [HET_ONNX_SYM_N, F]) and what uses it is folded. */
int het_onnx_fold_shape(rd *r, size_t i);
/* The constant `name` (folded, or a small numeric initializer), or NULL. */
kt *het_onnx_const(rd *r, const char *name);
/* Folds the constant nodes of the graph (marks them used); HET_OK or an error. */
int het_onnx_fold(rd *r);

#endif
