/* The model text format (src/model_io/netfile.c): every zoo model read from its shipped file
 * (models/NAME.net), built by the zoo, and built from layers written out by hand here are the
 * same model bit for bit (init, loss, gradients); the canonical text reads back to itself; bad
 * files give one line naming the file, the line and what was expected; shape errors name the
 * layer and the shapes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hetrain/netfile.h"
#include "test.h"

#define BATCH 4

/* The zoo as it was written in C before the model files: the reference the files must match. */
static int hand_layers(const char *name, int classes, het_layer **L) {
    int n = 0;
    if (strcmp(name, "mlp") == 0) {
        L[n++] = het_dense_new(256);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(128);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(classes);
    } else if (strcmp(name, "lenet5") == 0) {
        L[n++] = het_conv2d_new(6, 5, 1, 2);
        L[n++] = het_maxpool_new(2, 2);
        L[n++] = het_relu_new();
        L[n++] = het_conv2d_new(16, 5, 1, 0);
        L[n++] = het_maxpool_new(2, 2);
        L[n++] = het_relu_new();
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(120);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(84);
        L[n++] = het_relu_new();
        L[n++] = het_dense_new(classes);
    } else if (strcmp(name, "cifar-cnn") == 0) {
        for (int s = 0; s < 2; s++) {
            L[n++] = het_conv2d_new(32 << s, 3, 1, 1);
            L[n++] = het_relu_new();
            L[n++] = het_conv2d_new(32 << s, 3, 1, 1);
            L[n++] = het_relu_new();
            L[n++] = het_maxpool_new(2, 2);
        }
        L[n++] = het_flatten_new();
        L[n++] = het_dense_new(256);
        L[n++] = het_relu_new();
        L[n++] = het_dropout_new(0.5f);
        L[n++] = het_dense_new(classes);
    } else if (strcmp(name, "resnet20") == 0) {
        L[n++] = het_conv2d_new(16, 3, 1, 1);
        L[n++] = het_batchnorm_new(0.1f, 1e-5f);
        L[n++] = het_relu_new();
        for (int s = 0; s < 3; s++)
            for (int b = 0; b < 3; b++) L[n++] = het_resblock_new(16 << s, (s > 0 && b == 0) ? 2 : 1);
        L[n++] = het_avgpool_new(0, 0);
        L[n++] = het_dense_new(classes);
    }
    return n;
}

/* Loss, correct count and gradients of one training batch on fixed inputs. */
static void train_once(het_model *m, het_shape in, float *loss, float **grads) {
    size_t sz = het_shape_size(in) * BATCH;
    float *x = het_alloc(sz * sizeof(float));
    uint8_t y[BATCH];
    het_rng r;
    het_rng_seed(&r, 11);
    for (size_t i = 0; i < sz; i++) x[i] = 2.0f * het_rng_uniform(&r) - 1.0f;
    for (int i = 0; i < BATCH; i++) y[i] = (uint8_t)(i * 3 % 10);
    het_batch_result res;
    het_model_zero_grads(m);
    int st = het_model_train_batch(m, x, y, BATCH, 1.0f / BATCH, 1, &res);
    CHECK(st == HET_OK, "train_batch: %s", het_error_msg());
    *loss = (float)res.loss_sum;
    *grads = het_model_grads(m);
    het_free(x);
}

static void test_zoo_files(const char *name, het_shape in) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s.net", HET_SOURCE_DIR, name);
    het_net net;
    CHECK(het_net_read(&net, path) == HET_OK, "%s: %s", path, het_error_msg());
    CHECK(strcmp(net.name, name) == 0, "name '%s', expected '%s'", net.name, name);
    het_model *m[3] = {NULL, NULL, NULL};
    CHECK(het_net_build(&m[0], &net, in, 10, BATCH, 1) == HET_OK, "%s: %s", name, het_error_msg());
    CHECK(het_zoo_build(&m[1], name, in, 10, BATCH, 1) == HET_OK, "%s: %s", name, het_error_msg());
    het_layer *L[64];
    int n = hand_layers(name, 10, L);
    CHECK(het_model_create(&m[2], in, L, n, BATCH, 1) == HET_OK, "%s: %s", name, het_error_msg());
    if (!m[0] || !m[1] || !m[2]) goto out;
    size_t np = het_model_n_params(m[2]);
    CHECK(het_model_n_layers(m[0]) == n && het_model_n_params(m[0]) == np &&
          het_model_n_state(m[0]) == het_model_n_state(m[2]), "%s: layers %d vs %d", name,
          het_model_n_layers(m[0]), n);
    float loss[3], *g[3];
    for (int k = 0; k < 3; k++) {
        het_model_init_params(m[k], 5);
        train_once(m[k], in, &loss[k], &g[k]);
    }
    for (int k = 0; k < 2; k++) {
        CHECK(memcmp(het_model_params(m[k]), het_model_params(m[2]), np * sizeof(float)) == 0,
              "%s: %s: initial parameters differ from the hand-built model", name,
              k ? "zoo" : "file");
        CHECK(memcmp(&loss[k], &loss[2], sizeof(float)) == 0, "%s: loss %.9g vs %.9g", name,
              (double)loss[k], (double)loss[2]);
        CHECK(memcmp(g[k], g[2], np * sizeof(float)) == 0, "%s: gradients differ", name);
    }
    /* the canonical text reads back to the same network, and to the same text */
    char a[8192], b[8192];
    size_t la = het_net_format(&net, a, sizeof a);
    het_net again;
    CHECK(la < sizeof a && het_net_parse(&again, a, la, "canonical") == HET_OK, "%s: %s", name,
          het_error_msg());
    size_t lb = het_net_format(&again, b, sizeof b);
    CHECK(la == lb && memcmp(a, b, la) == 0, "%s: canonical text changed:\n%s---\n%s", name, a, b);
    CHECK(again.n == net.n, "%s: %d layers read back, expected %d", name, again.n, net.n);
    for (int i = 0; i < net.n && i < again.n; i++) {
        again.layer[i].line = net.layer[i].line; /* only where they were read differs */
        CHECK(memcmp(&again.layer[i], &net.layer[i], sizeof net.layer[i]) == 0,
              "%s: layer %d differs after the canonical text", name, i);
    }
out:
    for (int k = 0; k < 3; k++) het_model_free(m[k]);
}

/* A bad text: parse fails with HET_EFORMAT and a message holding every `want`. */
static void bad(const char *text, const char *want1, const char *want2) {
    het_net net;
    int st = het_net_parse(&net, text, strlen(text), "my.net");
    const char *msg = het_error_msg();
    CHECK(st == HET_EFORMAT, "'%s': status %d, expected HET_EFORMAT", text, st);
    CHECK(strstr(msg, want1) != NULL, "'%s': message '%s' lacks '%s'", text, msg, want1);
    if (want2) CHECK(strstr(msg, want2) != NULL, "'%s': message '%s' lacks '%s'", text, msg, want2);
    CHECK(strchr(msg, '\n') == NULL, "'%s': the message is more than one line: %s", text, msg);
}

static void test_errors(void) {
    bad("dense out=10\nsoftmax\n", "my.net: line 2: unknown layer 'softmax'", "expected one of: conv");
    bad("# c\n\nconv out=3 k=3 size=2\n", "my.net: line 3: conv: unknown key 'size'",
        "expected out, k, stride, pad");
    bad("conv k=3\n", "my.net: line 1: conv: missing out=", NULL);
    bad("dense out=ten\n", "line 1: dense: out=ten", "expected an integer in [1, 1048576] or 'classes'");
    bad("conv out=0 k=3\n", "conv: out=0", "expected an integer in [1, 65536]");
    bad("dense out=3 out=4\n", "dense: out given twice", NULL);
    bad("dropout p=1\n", "dropout: p=1", "expected a number in [0, 1)");
    bad("dropout p=nan\n", "dropout: p=nan", NULL);
    bad("batchnorm eps=0\n", "batchnorm: eps=0", NULL);
    /* values that round onto a bound as floats (found by fuzz_netfile: eps=1e-50 read as 0 and
     * was written back as eps=0, which the reader refuses) */
    bad("batchnorm eps=1e-50\n", "batchnorm: eps=1e-50", "expected a number in (0, 1)");
    bad("dropout p=0.99999999999\n", "dropout: p=0.99999999999", "expected a number in [0, 1)");
    bad("conv out=4 k=3 pad=3\n", "conv: pad=3, expected less than k=3", NULL);
    bad("dense out=4 =3\n", "dense: '=3', expected key=value", NULL);
    bad("relu x=1\n", "relu: unknown key 'x', expected none", NULL);
    bad("avgpool k=0 stride=2\n", "avgpool: stride= with a global pool", NULL);
    bad("dense out=4\nrelu\x01\n", "line 2: byte 0x01", "expected text");
    bad("", "my.net: no layers", NULL);
    bad("# only a comment\n   \n", "no layers", NULL);
    char long_line[400];
    memset(long_line, ' ', sizeof long_line - 1);
    long_line[sizeof long_line - 1] = 0;
    memcpy(long_line, "dense", 5);
    bad(long_line, "line 1: 399 bytes, expected at most 256", NULL);
    static char many[300 * 6 + 1];
    for (int i = 0; i < 300; i++) memcpy(many + 5 * i, "relu\n", 5);
    many[1500] = 0;
    bad(many, "line 257: more than 256 layers", NULL);

    /* comments, tabs, CR-LF, defaults */
    het_net net;
    const char *ok = "conv\tout=4 k=3 # a comment\r\nmaxpool k=2\r\navgpool\nflatten\ndense out=classes";
    CHECK(het_net_parse(&net, ok, strlen(ok), "ok.net") == HET_OK, "%s", het_error_msg());
    CHECK(net.n == 5 && net.layer[0].stride == 1 && net.layer[0].pad == 0 &&
          net.layer[1].stride == 2 && net.layer[2].k == 0 && net.layer[4].out == HET_NET_CLASSES,
          "defaults: n %d conv stride %d pad %d maxpool stride %d", net.n, net.layer[0].stride,
          net.layer[0].pad, net.layer[1].stride);
    CHECK(strcmp(net.name, "ok") == 0, "name '%s'", net.name);

    /* shape errors name the line, the layer and the input shape */
    const char *small = "conv out=4 k=5\nflatten\ndense out=classes\n";
    CHECK(het_net_parse(&net, small, strlen(small), "small.net") == HET_OK, "%s", het_error_msg());
    het_model *m = NULL;
    int st = het_net_build(&m, &net, (het_shape){1, 3, 3}, 10, 4, 1);
    CHECK(st == HET_ESHAPE && !m, "status %d", st);
    CHECK(strstr(het_error_msg(), "small.net: line 1: conv out=4 k=5 stride=1 pad=0 on input 1x3x3") != NULL,
          "message: %s", het_error_msg());
    const char *wide = "flatten\ndense out=7\n";
    CHECK(het_net_parse(&net, wide, strlen(wide), "wide.net") == HET_OK, "%s", het_error_msg());
    st = het_net_build(&m, &net, (het_shape){1, 4, 4}, 10, 4, 1);
    CHECK(st == HET_ESHAPE && !m && strstr(het_error_msg(), "wide.net: line 2: the network ends in "
                                           "7x1x1 values, expected 10") != NULL,
          "status %d: %s", st, het_error_msg());

    CHECK(het_net_read(&net, "/nonexistent/x.net") == HET_EIO &&
          strstr(het_error_msg(), "/nonexistent/x.net") != NULL, "%s", het_error_msg());
    CHECK(het_net_zoo(&net, "nope") == HET_EINVAL &&
          strstr(het_error_msg(), "expected one of: mlp, lenet5, cifar-cnn, resnet20") != NULL,
          "%s", het_error_msg());
}

/* A file read from disk: text with a suffix-less name, and the file's name kept. */
static void test_read_file(void) {
    char path[] = "/tmp/het_netfile_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    const char *text = "dense out=32\nrelu\ndense out=classes\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    het_net net;
    CHECK(het_net_read(&net, path) == HET_OK, "%s", het_error_msg());
    CHECK(net.n == 3 && strcmp(net.file, path) == 0 && strncmp(net.name, "het_netfile_", 12) == 0,
          "n %d file %s name %s", net.n, net.file, net.name);
    het_model *m = NULL;
    CHECK(het_net_build(&m, &net, (het_shape){1, 28, 28}, 10, 4, 1) == HET_OK, "%s", het_error_msg());
    CHECK(m && het_model_n_params(m) == 784 * 32 + 32 + 32 * 10 + 10, "params");
    CHECK(het_net_load_weights(&net, m) == HET_OK, "no weights: nothing to do");
    het_model_free(m);
    unlink(path);
}

int main(void) {
    test_zoo_files("mlp", (het_shape){1, 28, 28});
    test_zoo_files("lenet5", (het_shape){1, 28, 28});
    test_zoo_files("cifar-cnn", (het_shape){3, 32, 32});
    test_zoo_files("resnet20", (het_shape){3, 32, 32});
    test_errors();
    test_read_file();
    return het_test_finish("test_netfile");
}
