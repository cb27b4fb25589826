wit_bindgen::generate!({ world: "echo", path: "wit" });

struct Echo;

impl Guest for Echo {
    fn echo(text: String) -> String {
        text
    }
}

export!(Echo);
