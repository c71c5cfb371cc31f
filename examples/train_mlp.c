/* Trains the zoo's MLP on the synthetic dataset for one epoch through the public API, then
 * checks the test accuracy. Exits 0 only if it is above 0.8.
 *
 *   cc train_mlp.c $(pkg-config --static --cflags --libs hetrain) && ./a.out */
#include <hetrain.h>
#include <stdio.h>

int main(void) {
    /* The configuration is a plain struct; every option of `hetrain train` is also a key. */
    het_train_config cfg = het_train_config_defaults();
    static const char *const kv[][2] = {
        {"model", "mlp"}, {"data", "synthetic"}, {"epochs", "1"}, {"lr", "0.05"}, {"seed", "1"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (het_train_config_set(&cfg, kv[i][0], kv[i][1]) != HET_OK) {
            fprintf(stderr, "train_mlp: %s\n", het_error_msg());
            return 1;
        }
    het_trainer *t;
    if (het_trainer_create(&t, &cfg) != HET_OK) {
        fprintf(stderr, "train_mlp: %s\n", het_error_msg());
        return 1;
    }
    /* One epoch by hand: het_trainer_run() would also print, checkpoint and write metrics. */
    het_epoch_stats st;
    double test_loss = 0.0, test_acc = 0.0;
    if (het_trainer_train_epoch(t, &st) != HET_OK ||
        het_trainer_evaluate(t, &test_loss, &test_acc) != HET_OK) {
        fprintf(stderr, "train_mlp: %s\n", het_error_msg());
        het_trainer_free(t);
        return 1;
    }
    printf("train_mlp: %lld samples, loss %.4f, train acc %.4f, test loss %.4f, test acc %.4f, "
           "%.0f samples/s\n", (long long)st.samples, st.loss, st.train_acc, test_loss, test_acc,
           st.samples_per_s);
    printf("train_mlp: %zu parameters after %lld steps\n",
           het_model_n_params(het_trainer_model(t)), (long long)het_trainer_step(t));
    het_trainer_free(t);
    if (!(test_acc > 0.8)) {
        fprintf(stderr, "train_mlp: test accuracy %.4f, expected > 0.8\n", test_acc);
        return 1;
    }
    return 0;
}
