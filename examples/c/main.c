/* Classify handwritten digits from C with a kiln-built library: examples/train_mlp.py's
 * network and trained weights, and no Python, numpy or kiln at run time.
 *
 *   python examples/train_mlp.py
 *   kiln build examples/c/digits_model.py:classify --weights build/digits_mlp.safetensors -o build/
 *   cc examples/c/main.c -Ibuild -Lbuild -lclassify -Wl,-rpath,'$ORIGIN' -o build/main
 *   zcat examples/data/digits.csv.gz | build/main
 *
 * Each line of standard input is an 8x8 image: 64 pixels 0..16, comma-separated, optionally
 * followed by its label (examples/data/digits.csv.gz's format). Each line of output is the
 * digit the network sees, its probability and the label; then the accuracy.
 */
#include <stdio.h>
#include <stdlib.h>

#include "classify.h"

/* Reads the pixels of `line` into `image` and its label (-1 if none); 0 if too few pixels. */
static int parse(const char *line, float *image, long *label) {
    char *end;
    for (int i = 0; i < CLASSIFY_IMAGE_SIZE; i++) {
        image[i] = strtof(line, &end);
        if (end == line) return 0;
        line = end + (*end == ',');
    }
    *label = strtol(line, &end, 10);
    if (end == line) *label = -1;
    return 1;
}

int main(void) {
    char line[4096];
    float image[CLASSIFY_IMAGE_SIZE];
    int64_t digit[CLASSIFY_OUT0_SIZE];
    float probabilities[CLASSIFY_OUT1_SIZE];
    int count = 0, labelled = 0, right = 0;
    while (fgets(line, sizeof line, stdin)) {
        long label;
        if (!parse(line, image, &label)) {
            fprintf(stderr, "line %d: expected %d comma-separated pixels\n", count + 1, CLASSIFY_IMAGE_SIZE);
            return 1;
        }
        int32_t status = classify(image, digit, probabilities);
        if (status != 0) {
            fprintf(stderr, "classify failed with status %d\n", (int)status);
            return 1;
        }
        count++;
        printf("digit %d (p = %.4f)", (int)digit[0], probabilities[digit[0]]);
        if (label >= 0) {
            printf(", label %ld", label);
            labelled++;
            right += label == digit[0];
        }
        printf("\n");
    }
    if (labelled) printf("accuracy %.4f (%d of %d)\n", (double)right / labelled, right, labelled);
    return 0;
}
