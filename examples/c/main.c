/* Call a kiln-built MLP from C: no Python, numpy or kiln needed at run time.
 *
 *   kiln build examples/c/mlp_model.py:mlp -o build/
 *   cc examples/c/main.c -Ibuild -Lbuild -lmlp -Wl,-rpath,'$ORIGIN' -o build/main
 *   ./build/main
 */
#include <stdio.h>

#include "mlp.h"

int main(void) {
    float x[MLP_X_SIZE];
    float probabilities[MLP_OUT0_SIZE];
    for (int i = 0; i < MLP_X_DIM0; i++)
        for (int j = 0; j < MLP_X_DIM1; j++)
            x[i * MLP_X_DIM1 + j] = (float)(i * MLP_X_DIM1 + j) / 32.0f - 0.5f;
    int32_t status = mlp(x, probabilities);
    if (status != 0) {
        fprintf(stderr, "mlp failed with status %d\n", (int)status);
        return 1;
    }
    for (int i = 0; i < MLP_OUT0_DIM0; i++) {
        for (int k = 0; k < MLP_OUT0_DIM1; k++)
            printf("%.6f%s", probabilities[i * MLP_OUT0_DIM1 + k], k + 1 < MLP_OUT0_DIM1 ? " " : "\n");
    }
    return 0;
}
