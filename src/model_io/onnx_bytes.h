/* Internal to model_io/: the ONNX reader on bytes already read (onnx_read.c), for het_net_read
 * (netfile.c), which reads a model file once and then tells ONNX from text by its bytes. */
#ifndef HET_MODEL_IO_ONNX_BYTES_H
#define HET_MODEL_IO_ONNX_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "hetrain/netfile.h"

#define HET_ONNX_MAX_BYTES ((size_t)1 << 30) /* larger files are refused (protobuf: 2 GiB) */

/* het_net_read_onnx on the n bytes of buf, read from `path` (named in errors). */
int het_net_parse_onnx(het_net *net, const uint8_t *buf, size_t n, const char *path);

#endif
