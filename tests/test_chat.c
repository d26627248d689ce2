// test_chat.c: chat_render (src/tok/chat.c) against transformers' apply_chat_template renderings
// of the same templates (tests/fixtures/chat_templates.json, made by tests/ref/gen_chat_fixture.py):
// every byte equal for the families mtac renders, and a refusal naming the families for the others.
#include "io/fsutil.h"
#include "tok/chat.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *str(const cJSON *o, const char *key) { return cJSON_GetStringValue(cJSON_GetObjectItem(o, key)); }

static void test_fixture(void **state) {
    (void)state;
    char err[512];
    char *json = read_text_file("tests/fixtures/chat_templates.json", 1 << 20, err, sizeof err);
    if (!json) fail_msg("%s", err);
    cJSON *all = cJSON_Parse(json);
    assert_non_null(all);
    int n = 0, known = 0;
    for (const cJSON *c = all->child; c; c = c->next, n++) {
        const char *family = str(c, "family"), *tmpl = str(c, "template"), *expected = str(c, "expected");
        char *got = chat_render(tmpl, str(c, "bos"), str(c, "user"), err, sizeof err);
        if (!family) {
            assert_int_equal(chat_family_of(tmpl), CHAT_UNKNOWN);
            assert_null(got);
            assert_non_null(strstr(err, "ChatML, Llama 3"));
            continue;
        }
        known++;
        assert_string_equal(chat_family_name(chat_family_of(tmpl)), family);
        if (!got) fail_msg("case %d: %s", n, err);
        if (strcmp(got, expected)) fail_msg("case %d (%s): got\n%s\nexpected\n%s", n, family, got, expected);
        free(got);
    }
    assert_true(known >= 20 && n > known);  // the fixture is whole
    cJSON_Delete(all);
    free(json);
}

static void test_no_template(void **state) {
    (void)state;
    char err[512];
    assert_null(chat_render(NULL, "<s>", "hi", err, sizeof err));
    assert_non_null(strstr(err, "no chat template"));
    // Llama 3.1's dated system messages are not Llama 3's text
    assert_int_equal(chat_family_of("<|start_header_id|>system ... Cutting Knowledge Date: ... <|eot_id|>"), CHAT_UNKNOWN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture),
        cmocka_unit_test(test_no_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
