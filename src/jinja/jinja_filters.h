// Jinja2's built-in filters (`value | name(args)`), as Hugging Face's chat
// templates see them (tojson is HF's: json.dumps with ensure_ascii=False).
//
// abs attr batch capitalize center count d default dictsort e escape first float
// format indent int items join last length list lower map max min reject
// rejectattr replace reverse round safe select selectattr sort string sum title
// tojson trim truncate unique upper wordcount
//
// Not provided: groupby, filesizeformat, forceescape, pprint, random, slice,
// striptags, urlencode, urlize, wordwrap, xmlattr.
#pragma once

#include <string_view>

#include "jinja/jinja_eval.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

bool has_filter(std::string_view name);
// Throws ValueError for bad arguments or input types.
Value apply_filter(Evaluator& ev, std::string_view name, const Value& input, const CallArgs& args);

}  // namespace pagellm::jinja
